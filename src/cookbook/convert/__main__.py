"""`python -m cookbook.convert NAME ARGS...` runs one converter (used by tools/convert/NAME)."""

import sys

from cookbook.commands.convert import convert, main_for

if len(sys.argv) > 1 and sys.argv[1] in convert.commands:
    name = sys.argv.pop(1)
    main_for(name)
else:
    convert.main(prog_name="cookbook convert")
