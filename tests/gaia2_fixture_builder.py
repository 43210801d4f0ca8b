"""Regenerates porchestra/envs/gaia2/fixtures/*.json (the project's own GAIA2-format scenarios).

Run with ARE's interpreter (app states are produced by ARE's own app classes):

    $(python -m porchestra.envs.gaia2.venv) tests/gaia2_fixture_builder.py

Events are written by hand in the ExportedTrace format (ARE's exporter writes `str(v)` for oracle
arguments, so lists and None do not round-trip): lists are JSON text with value_type "list".
Not a test module (no `test_` prefix); it imports ARE, which is not installed in porchestra's venv.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from are.simulation.apps import (AgentUserInterface, CalendarApp, ContactsApp, EmailClientV2,
                                 MessagingAppV2, RentAFlat, SystemApp)
from are.simulation.apps.contacts import Contact

OUT = Path(__file__).resolve().parents[1] / "porchestra" / "envs" / "gaia2" / "fixtures"
START = 1728982800.0  # 2024-10-15 09:00:00 UTC, a Tuesday
USER_EMAIL = "alex.rivera@example.com"


def arg(name, value):
    if isinstance(value, (list, dict)):
        return {"name": name, "value": json.dumps(value), "value_type": type(value).__name__}
    if isinstance(value, bool):
        return {"name": name, "value": str(value), "value_type": "bool"}
    if isinstance(value, (int, float)):
        return {"name": name, "value": str(value), "value_type": type(value).__name__}
    return {"name": name, "value": value, "value_type": "str"}


def event(eid, kind, app, fn, args, deps=(), delay=0.0):
    oracle = kind == "AGENT"
    ev = {"class_name": "OracleEvent" if oracle else "Event", "event_type": kind, "event_time": None,
          "event_id": eid, "dependencies": list(deps), "event_relative_time": float(delay),
          "action": {"action_id": f"{eid}-action", "app": app, "function": fn,
                     "operation_type": None, "args": [arg(k, v) for k, v in args.items()]}}
    if oracle:
        ev["event_time_comparator"] = None
    return ev


def user(eid, content, deps=(), delay=0.0):
    return event(eid, "USER", "AgentUserInterface", "send_message_to_agent", {"content": content}, deps, delay)


def to_user(eid, content, deps, delay=1.0):
    return event(eid, "AGENT", "AgentUserInterface", "send_message_to_user", {"content": content}, deps, delay)


def contacts(*people):
    app = ContactsApp(name="Contacts")
    app.add_contact(Contact(first_name="Alex", last_name="Rivera", contact_id="c-alex", is_user=True,
                            email=USER_EMAIL, phone="+1 555 0100", city_living="Lyon"))
    for cid, first, last, email in people:
        app.add_contact(Contact(first_name=first, last_name=last, contact_id=cid, email=email))
    return app


def exported(app, class_name):
    return {"name": app.name, "class_name": class_name, "app_state": json.loads(json.dumps(
        app.get_state(), default=lambda o: getattr(o, "value", str(o))))}


def trace(sid, tags, apps, events, duration=None):
    return {"metadata": {"definition": {"scenario_id": sid, "seed": 0, "duration": duration,
                                        "time_increment_in_seconds": 1, "start_time": START, "tags": tags}},
            "apps": apps, "events": events, "completed_events": [], "world_logs": [],
            "version": "are_simulation_v1"}


def base_apps(*people, emails=True, calendar=True):
    apps = [exported(AgentUserInterface(), "AgentUserInterface"), exported(contacts(*people), "ContactsApp")]
    if calendar:
        apps.append(exported(CalendarApp(name="Calendar"), "CalendarApp"))
    if emails:
        apps.append(exported(EmailClientV2(name="Emails", user_email=USER_EMAIL), "EmailClientV2"))
    return apps


def execution():
    lena = ("c-lena", "Lena", "Park", "lena.park@example.com")
    body = "Hi Lena, I booked Budget review tomorrow 14:00-15:00. Alex"
    events = [
        user("e0", "Please schedule a meeting titled 'Budget review' with Lena Park tomorrow (2024-10-16) "
                   "from 14:00 to 15:00, then email her at her contact address with subject 'Budget review' "
                   f"and the body '{body}'. Tell me when it is done."),
        event("o1", "AGENT", "Calendar", "add_calendar_event",
              {"title": "Budget review", "start_datetime": "2024-10-16 14:00:00",
               "end_datetime": "2024-10-16 15:00:00", "attendees": ["Lena Park"]}, ["e0"], 2),
        event("o2", "AGENT", "Emails", "send_email",
              {"recipients": ["lena.park@example.com"], "subject": "Budget review", "content": body}, ["o1"], 1),
        to_user("o3", "Done: 'Budget review' is booked for 2024-10-16 14:00-15:00 and Lena has been emailed.",
                ["o2"]),
    ]
    return trace("gaia2_fx_execution_meeting", ["Execution"], base_apps(lena), events)


def search():
    flats = RentAFlat()
    rows = [("Croix-Rousse Loft", "Lyon", "69004", 980.0, 2), ("Presqu'ile Flat", "Lyon", "69002", 1150.0, 2),
            ("Part-Dieu Studio", "Lyon", "69003", 640.0, 1), ("Marais Duplex", "Paris", "75004", 890.0, 2),
            ("Gerland Terrace", "Lyon", "69007", 1020.0, 2)]
    ids = {}
    for name, city, zip_code, price, beds in rows:
        ids[name] = flats.add_new_apartment(name=name, location=city, zip_code=zip_code, price=price,
                                            number_of_bedrooms=beds, number_of_bathrooms=1,
                                            square_footage=55 + 10 * beds)
    events = [
        user("e0", "Find the cheapest 2-bedroom apartment in Lyon on RentAFlat, save it to my favourites "
                   "and tell me its name."),
        event("o1", "AGENT", "RentAFlat", "search_apartments", {"location": "Lyon", "number_of_bedrooms": 2},
              ["e0"], 1),
        event("o2", "AGENT", "RentAFlat", "save_apartment", {"apartment_id": ids["Croix-Rousse Loft"]}, ["o1"], 1),
        to_user("o3", "The cheapest 2-bedroom apartment in Lyon is Croix-Rousse Loft (980/month); I saved it.",
                ["o2"]),
    ]
    apps = base_apps(emails=False, calendar=False) + [exported(flats, "RentAFlat")]
    return trace("gaia2_fx_search_apartment", ["Search"], apps, events)


def adaptability():
    marco = ("c-marco", "Marco", "Rossi", "marco.rossi@example.com")
    ask = "Hi Marco, does Friday 2024-10-18 at 19:00 work for dinner? Alex"
    events = [
        user("e0", "Email Marco Rossi (subject 'Dinner on Friday', body: '" + ask + "'). Then wait for his "
                   "answer: if he proposes another time, add a one-hour calendar event 'Dinner with Marco' "
                   "with attendee Marco Rossi at the time he proposes, and tell me what was agreed."),
        event("o1", "AGENT", "Emails", "send_email",
              {"recipients": ["marco.rossi@example.com"], "subject": "Dinner on Friday", "content": ask},
              ["e0"], 2),
        event("e1", "ENV", "Emails", "create_and_add_email",
              {"sender": "marco.rossi@example.com", "recipients": [USER_EMAIL], "subject": "Re: Dinner on Friday",
               "content": "Hi Alex, 19:00 is too early for me. Could we do 20:30 instead? Marco"}, ["e0"], 40),
        event("o2", "AGENT", "Calendar", "add_calendar_event",
              {"title": "Dinner with Marco", "start_datetime": "2024-10-18 20:30:00",
               "end_datetime": "2024-10-18 21:30:00", "attendees": ["Marco Rossi"]}, ["e1"], 3),
        to_user("o3", "Marco proposed 20:30 instead of 19:00; I added 'Dinner with Marco' on Friday "
                      "2024-10-18 20:30-21:30.", ["o2"]),
    ]
    return trace("gaia2_fx_adaptability_dinner", ["Adaptability"], base_apps(marco), events)


def time_category():
    msgs = MessagingAppV2(name="Messages")
    msgs.current_user_id, msgs.current_user_name = "u-alex", "Alex Rivera"
    msgs.name_to_id.update({"Alex Rivera": "u-alex", "Paul Martin": "u-paul"})
    msgs.id_to_name.update({"u-alex": "Alex Rivera", "u-paul": "Paul Martin"})
    paul = ("c-paul", "Paul", "Martin", "paul.martin@example.com")
    events = [
        user("e0", "In 3 minutes (not before), send Paul Martin a message on Messages saying exactly "
                   "'Time to leave for the station!'."),
        event("o1", "AGENT", "Messages", "send_message",
              {"user_id": "u-paul", "content": "Time to leave for the station!"}, ["e0"], 180),
        to_user("o2", "I sent Paul the message 'Time to leave for the station!'.", ["o1"]),
    ]
    apps = base_apps(paul, emails=False, calendar=False) + [exported(msgs, "MessagingAppV2")]
    return trace("gaia2_fx_time_message", ["Time"], apps, events)


def two_turns():
    lena = ("c-lena", "Lena", "Park", "lena.park@example.com")
    body = "Hi Lena, I will be at the office at 10:00 on Thursday. Alex"
    events = [
        user("e0", "Add a calendar event 'Dentist' on 2024-10-17 from 08:30 to 09:30 and tell me when it is done."),
        event("o1", "AGENT", "Calendar", "add_calendar_event",
              {"title": "Dentist", "start_datetime": "2024-10-17 08:30:00", "end_datetime": "2024-10-17 09:30:00"},
              ["e0"], 2),
        to_user("o2", "Added 'Dentist' on 2024-10-17 08:30-09:30.", ["o1"]),
        user("e1", "Thanks. Please also email Lena Park (subject 'Running late Thursday', body: '" + body + "').",
             ["o2"], 5),
        event("o3", "AGENT", "Emails", "send_email",
              {"recipients": ["lena.park@example.com"], "subject": "Running late Thursday", "content": body},
              ["e1"], 2),
        to_user("o4", "Done: Lena has been emailed.", ["o3"]),
    ]
    return trace("gaia2_fx_execution_two_turns", ["Execution"], base_apps(lena), events)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for build in (execution, search, adaptability, time_category, two_turns):
        t = build()
        path = OUT / f"{t['metadata']['definition']['scenario_id']}.json"
        path.write_text(json.dumps(t, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
