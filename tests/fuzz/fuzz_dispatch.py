"""Coverage-guided fuzzing of the dispatcher and every command handler
(atheris / libFuzzer): random and mutated command lines through
``hotkv.core.dispatch.process_command`` on an in-process server.

Property: see targets.Dispatcher.run -- one well-formed reply per command,
no unhandled exception, no "internal error", no hang.  Run (see README.md):

    python tests/fuzz/fuzz_dispatch.py -max_total_time=600
"""

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

with atheris.instrument_imports(include=["hotkv"]):
    import hotkv  # noqa: F401
import targets  # noqa: E402

D = targets.Dispatcher()
NAMES = [n.encode() for n in D.commands]


def one_input(data: bytes):
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeIntInRange(0, 50) == 0:
        D.reset()
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        name = NAMES[fdp.ConsumeIntInRange(0, len(NAMES) - 1)]
        argv = name.split(b"|")
        if fdp.ConsumeIntInRange(0, 9) == 0:
            argv[0] = argv[0].upper()
        for _ in range(fdp.ConsumeIntInRange(0, 8)):
            if fdp.ConsumeBool():
                argv.append(targets.INTERESTING[
                    fdp.ConsumeIntInRange(0, len(targets.INTERESTING) - 1)])
            else:
                argv.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 12)))
        D.run(argv, resp3=fdp.ConsumeBool())


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
