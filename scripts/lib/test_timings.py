#!/usr/bin/env python3
"""The timings table that scripts/test prints at the end of every run.

Reads the stages scripts/test and scripts/setup timed (a TSV file: name, seconds) and the JUnit
files ctest wrote (`ctest --output-junit`), one per ctest run, each named by the build it ran in.
Prints the stages and the slowest tests; with --json FILE also writes everything as JSON, so a
change's cost in CI time can be compared run against run (docs/development.md, "CI time").

  test_timings.py --stages FILE [--junit BUILD=FILE ...] [--slowest N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def read_stages(path: Path) -> list[dict]:
    stages = []
    if not path.exists():
        return stages
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise SystemExit(f"{path}:{number}: expected 'name<TAB>seconds', got {line!r}")
        stages.append({"name": fields[0], "seconds": float(fields[1])})
    return stages


def read_junit(build: str, path: Path) -> list[dict]:
    """The test cases of one ctest run; a missing file (ctest never ran) has none."""
    if not path.exists():
        return []
    tests = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None or status in ("disabled", "notrun"):
            status = "skipped"
        elif status == "run":
            status = "passed"
        tests.append({"name": case.get("name", "?"), "build": build,
                      "seconds": float(case.get("time", "0") or 0), "status": status})
    return tests


def summary(stages: list[dict], tests: list[dict], slowest: int) -> dict:
    counts: dict[str, dict[str, int]] = {}
    for test in tests:
        per_build = counts.setdefault(test["build"], {"passed": 0, "failed": 0, "skipped": 0})
        per_build[test["status"]] = per_build.get(test["status"], 0) + 1
    return {
        "total_seconds": round(sum(s["seconds"] for s in stages if "/" not in s["name"]), 1),
        "stages": stages,
        "counts": counts,
        "slowest": sorted(tests, key=lambda t: t["seconds"], reverse=True)[:slowest],
        "tests": tests,
    }


def render(report: dict) -> str:
    lines = ["", "Stages (seconds; indented: parts of the stage above, which may overlap):"]
    for stage in report["stages"]:
        if "/" in stage["name"]:
            continue
        lines.append(f"  {stage['name']:<40} {stage['seconds']:>8.1f}")
        for part in report["stages"]:
            if part["name"].startswith(stage["name"] + "/"):
                lines.append(f"    {part['name'].split('/', 1)[1]:<38} {part['seconds']:>8.1f}")
    lines.append(f"  {'total':<40} {report['total_seconds']:>8.1f}")
    if report["slowest"]:
        lines.append(f"Slowest {len(report['slowest'])} tests (seconds of wall time, side by side "
                     "with others):")
        for test in report["slowest"]:
            lines.append(f"  {test['build'] + '/' + test['name']:<56} {test['seconds']:>8.1f}"
                         f"  {test['status']}")
    for build, count in report["counts"].items():
        lines.append(f"Tests in {build}: {count['passed']} passed, {count['failed']} failed, "
                     f"{count['skipped']} skipped")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--junit", action="append", default=[], metavar="BUILD=FILE")
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    tests = []
    for item in args.junit:
        build, separator, file = item.partition("=")
        if not separator:
            parser.error(f"--junit {item!r}: expected BUILD=FILE")
        tests += read_junit(build, Path(file))
    report = summary(read_stages(args.stages), tests, args.slowest)
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
