"""The ``flowgrad`` command.

    flowgrad demo [--quick] [--out DIR] [--no-train] [--no-code]
    flowgrad check MODULE:FUNCTION --shape 3,4 [--shape 4] [--dtype float64] [--order 2]
"""
import argparse
import importlib
import os
import sys


def main(argv=None):
    """Entry point of the ``flowgrad`` console script (and ``python -m flowgrad``)."""
    parser = argparse.ArgumentParser(prog="flowgrad",
                                     description="flowgrad: TF.js autodiff in Python.")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="the seed tutorials' examples, a training run with "
                                       "its gradient report, and four bugs caught")
    demo.add_argument("--quick", action="store_true", help="a shorter training run")
    demo.add_argument("--out", default="flowgrad-report", help="where the report goes")
    demo.add_argument("--no-train", action="store_true", help="skip the training run")
    demo.add_argument("--no-code", action="store_true", help="print results only")
    check = sub.add_parser("check", help="check a function's gradients against finite "
                                         "differences")
    check.add_argument("target", help="MODULE:FUNCTION (MODULE importable from here)")
    check.add_argument("--shape", action="append", required=True,
                       help="an argument's shape, e.g. 3,4 (one --shape per argument; "
                            "'' for a scalar)")
    check.add_argument("--dtype", default="float32", help="float32 (default) or float64")
    check.add_argument("--order", type=int, default=1, help="highest derivative order")
    check.add_argument("--modes", default="rev", help="rev, fwd or rev,fwd")
    check.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as demo_mod
        return demo_mod.main(quick=args.quick, out=args.out, train=not args.no_train,
                             show_code=not args.no_code)
    if args.command == "check":
        return _check(args, parser)
    parser.print_help()
    return 0 if args.command is None else 2


def _check(args, parser):
    import numpy as np

    import flowgrad as tf
    if ":" not in args.target:
        parser.error(f"check: give MODULE:FUNCTION, got {args.target!r}")
    module_name, fn_name = args.target.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        parser.error(f"check: cannot import {module_name!r}: {e}")
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        parser.error(f"check: {module_name} has no function {fn_name!r}")
    try:
        shapes = [tuple(int(s) for s in spec.split(",") if s.strip()) for spec in args.shape]
    except ValueError:
        parser.error(f"check: shapes are comma-separated integers, got {args.shape}")
    rng = np.random.default_rng(args.seed)
    inputs = [tf.tensor(rng.uniform(-1, 1, s), dtype=args.dtype) for s in shapes]
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    report = tf.debug.check_grads(fn, inputs, order=args.order, modes=modes,
                                  raise_on_fail=False, seed=args.seed)
    print(f"{args.target} at inputs of shape {', '.join(map(str, shapes))} ({args.dtype}):")
    print(report)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
