#!/usr/bin/env python3
"""Runs a benchmark's short form and checks that it did what a benchmark must: exit 0 and print
one JSON document on stdout holding the fields its readers (docs, baselines) look for.

  run_short_form.py [--require KEY]... [--goals-may-miss] [--timeout S] -- COMMAND ARGS...

The long forms (the defaults of each benchmark) measure; these runs only prove that every
benchmark still starts, finishes and reports, so that a change cannot break one unseen.
"""
import argparse
import json
import subprocess
import sys


def parse_document(stdout):
    """The JSON document on stdout: the whole of it, or else its last top-level object."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    document = None
    position = text.find("{")
    while position != -1:
        try:
            document, end = decoder.raw_decode(text, position)
            position = text.find("{", end)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
    return document


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require", action="append", default=[], metavar="KEY",
                        help="a top-level field the document must have (repeatable)")
    parser.add_argument("--goals-may-miss", action="store_true",
                        help="exit 3 passes too: the benchmark's way of saying it ran and a goal "
                             "was missed, which a short run on a shared machine may well do")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the benchmark's command after --")
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=args.timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {command[0]} ran past {args.timeout:.0f} s", file=sys.stderr)
        return 1
    if run.returncode != 0 and not (args.goals_may_miss and run.returncode == 3):
        print(run.stdout)
        print(f"FAIL: {command[0]} exited {run.returncode}", file=sys.stderr)
        return 1
    document = parse_document(run.stdout)
    if not isinstance(document, dict):
        print(run.stdout)
        print(f"FAIL: {command[0]} printed no JSON object on stdout", file=sys.stderr)
        return 1
    missing = [key for key in args.require if key not in document]
    if missing:
        print(json.dumps(document, indent=2))
        print(f"FAIL: the document lacks {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"ok: {command[0]} reported {', '.join(sorted(document))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
