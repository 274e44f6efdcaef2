"""What a schemathesis run did, read from its NDJSON report (test_admin_api_contract.py and
test_toxiproxy_api_contract.py print it beside their verdicts)."""

from __future__ import annotations

import json
from pathlib import Path


def run_numbers(report_dir: Path) -> dict:
    """Per phase: scenarios run and requests made (stateful: steps); and the operations loaded."""
    phases: dict = {}
    operations = None
    for f in report_dir.glob("*.ndjson"):
        for line in f.read_text().splitlines():
            event = json.loads(line)
            kind, data = next(iter(event.items()))
            if kind == "LoadingFinished":
                operations = data["statistic"]["operations"]
            if kind == "ScenarioFinished":
                p = phases.setdefault(data["phase"], {"scenarios": 0, "requests": 0})
                p["scenarios"] += 1
                p["requests"] += len(data["recorder"].get("interactions", {}))
    return {"operations": operations, "phases": phases}
