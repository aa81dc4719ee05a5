"""The ``flowgrad`` command: ``flowgrad demo`` runs the tour of the seed tutorials."""
import argparse
import sys


def main(argv=None):
    """Entry point of the ``flowgrad`` console script (and ``python -m flowgrad``)."""
    parser = argparse.ArgumentParser(prog="flowgrad",
                                     description="flowgrad: TF.js autodiff in Python.")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the examples of the seed tutorials")
    demo.add_argument("--no-code", action="store_true", help="print results only")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as demo_mod
        demo_mod.run(show_code=not args.no_code)
        return 0
    parser.print_help()
    return 0 if args.command is None else 2


if __name__ == "__main__":
    sys.exit(main())
