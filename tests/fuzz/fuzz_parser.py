"""Coverage-guided fuzzing of the RESP request parser (atheris / libFuzzer).

Property: see targets.parse_check -- never raises, only lists of bytes,
split-invariant commands and protocol errors.  Run (see README.md):

    python tests/fuzz/fuzz_parser.py -max_total_time=600 tests/fuzz/corpus/parser
"""

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hotkv.protocol.resp  # noqa: E402
import targets  # noqa: E402

# Instrument only the parser: instrumenting every import costs half a minute.
for _name, _fn in list(vars(hotkv.protocol.resp.RequestParser).items()):
    if callable(_fn) and hasattr(_fn, "__code__"):
        setattr(hotkv.protocol.resp.RequestParser, _name, atheris.instrument_func(_fn))
    elif isinstance(_fn, staticmethod):
        setattr(hotkv.protocol.resp.RequestParser, _name,
                staticmethod(atheris.instrument_func(_fn.__func__)))
_resp = hotkv.protocol.resp
_resp.split_inline_args = atheris.instrument_func(_resp.split_inline_args)
hotkv.protocol.resp._string2ll = atheris.instrument_func(hotkv.protocol.resp._string2ll)


def one_input(data: bytes):
    fdp = atheris.FuzzedDataProvider(data)
    auth = fdp.ConsumeBool()
    cuts = [fdp.ConsumeIntInRange(0, 4096) for _ in range(fdp.ConsumeIntInRange(0, 8))]
    targets.parse_check(fdp.ConsumeBytes(targets.SMALL_LIMIT), cuts, auth)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
