"""The "other process" of jobledger's wake-up measurement (run by ``jobledger_adapter``).

Reads one integer per line on stdin, enqueues one ``bench.noop`` job whose payload names it,
and answers ``<i> <commit time>`` on stdout, the time being ``time.time()`` right after the
enqueue transaction committed. Wall-clock time, because it is compared with the time the
handler started in another process (``perf_counter`` is not comparable across processes).
Prints ``ready`` once the ledger is open; exits at end of input.
"""

from __future__ import annotations

import argparse
import sys
import time

from ledger import Ledger

JOB_TYPE = "bench.noop"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    url = parser.parse_args().url
    with Ledger.open(url, pool_size=1) as ledger:
        print("ready", flush=True)
        for line in sys.stdin:
            sample = int(line)
            ledger.enqueue(JOB_TYPE, {"wake": sample})
            committed = time.time()  # noqa: TID251 - cross-process wall clock, see docstring
            print(f"{sample} {committed!r}", flush=True)


if __name__ == "__main__":
    main()
