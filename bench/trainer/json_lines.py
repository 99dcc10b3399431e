"""The JSON lines of a log or sample file, for the benchmarks in this folder."""
import json


def read_json_lines(path):
    """Every line that is a JSON object; other lines (and a line still being written) are
    skipped; a file not written yet has none."""
    lines = []
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("{"):
                    try:
                        lines.append(json.loads(line))
                    except ValueError:
                        pass  # a line being written
    except FileNotFoundError:
        pass
    return lines
