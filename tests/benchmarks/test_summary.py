"""results/SUMMARY.md follows every benchmark's results: rewritten by each `write_result`."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import STATUS_FILE, write_result, write_summary  # noqa: E402


def _payload(figure: int) -> dict:
    table = {"columns": ["batch", "sps"], "rows": [[1, figure]]}
    return {"meta": {"date": "2026-12-04"}, "tables": [table]}


def test_each_result_rewrites_the_summary(tmp_path):
    write_result("alpha", _payload(111), tmp_path)
    write_result("beta_quick", _payload(222), tmp_path)
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "<!-- alpha.md -->" in summary and "111" in summary
    assert "beta_quick" not in summary  # smoke runs stay out of the full summary
    write_result("alpha", _payload(333), tmp_path)  # a rerun replaces its section's figures
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "333" in summary and "111" not in summary
    assert "<!-- beta_quick.md -->" in write_summary(tmp_path, quick=True).read_text()


def test_the_last_bench_run_status_is_kept(tmp_path):
    status = {"date": "2026-12-04T22:00:00+00:00", "outcomes": [["alpha", 0, 12.0], ["beta", 3, 4]]}
    (tmp_path / STATUS_FILE).write_text(json.dumps(status))
    write_result("alpha", _payload(111), tmp_path)
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "| alpha | ok | 12 |" in summary and "| beta | FAILED (exit 3) | 4 |" in summary
