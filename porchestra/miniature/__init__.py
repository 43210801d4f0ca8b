"""The miniature of the paper's RQ2 on the testbed with the embedded model (docs/miniature.md):
`python -m porchestra.miniature --out runs/miniature` runs (or resumes) every step and writes the table."""
