"""Interleaved benchmark rounds, for the benchmarks in this folder."""


def interleaved_rounds(systems, rounds, run_one):
    """Runs every system once per round, every other round in reverse order, so a load that
    rises or falls through a round hits the systems alike. run_one(system, round_index) gives
    one run's summary; returns {system: [summary per round]}."""
    runs = {system: [] for system in systems}
    for round_index in range(rounds):
        for system in (systems if round_index % 2 == 0 else systems[::-1]):
            runs[system].append(run_one(system, round_index))
    return runs
