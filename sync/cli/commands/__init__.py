"""One module per command, named after it: `register(subparsers)` and `run(args, ctx)`.

Commands do I/O only: they parse arguments, call the steps, print and write.
"""
