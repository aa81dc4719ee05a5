"""``python -m bench [--quick] [names...]``: run the workloads and print a table of
flowgrad's time, the NumPy floor's, and their ratio. Rows marked ``[torch]``, ``[jax]`` or
``[autograd]`` put that peer in flowgrad's column (measured only where importable)."""
import argparse
import sys

from .workloads import WORKLOADS


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("names", nargs="*", help=f"workloads (default all: {', '.join(WORKLOADS)})")
    p.add_argument("--quick", action="store_true", help="few repetitions (CI: results only)")
    p.add_argument("--reps", type=int, default=None, help="rounds per measurement")
    args = p.parse_args(argv)
    reps = args.reps or (2 if args.quick else 9)
    names = args.names or list(WORKLOADS)
    print(f"{'workload':44} {'flowgrad':>12} {'floor':>12} {'ratio':>7}")
    for name in names:
        for label, fg, floor, scale, unit in WORKLOADS[name](reps):
            print(f"{label:44} {fg * scale:9.3f} {unit:>2} {floor * scale:9.3f} {unit:>2} "
                  f"{fg / floor:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
