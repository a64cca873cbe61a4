#!/usr/bin/env python3
"""Every key the configuration reader accepts is documented in
config/matchbook.toml (as a setting or in its comments).

src/app/config.cc lists the keys of each table in `constexpr std::string_view
k<Table>Keys[] = {...}` arrays, which it uses to refuse unknown keys; this
check reads the same arrays, so a key added there and not to the file fails.

Usage: tests/config_keys.py [REPO_ROOT]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
source = (root / "src/app/config.cc").read_text()
documented = (root / "config/matchbook.toml").read_text()

arrays = re.findall(r"constexpr std::string_view k(\w+)Keys\[\] = \{(.*?)\};", source, re.S)
if len(arrays) < 10:
    sys.exit(f"config_keys: found only {len(arrays)} key lists in src/app/config.cc")
missing = []
total = 0
for table, body in arrays:
    for key in re.findall(r'"([^"]+)"', body):
        total += 1
        if not re.search(r"(?<![\w.])" + re.escape(key) + r"(?!\w)", documented):
            missing.append(f"{key} (k{table}Keys)")
if missing:
    sys.exit("config_keys: config/matchbook.toml does not document: " + ", ".join(missing))
print(f"config_keys: all {total} keys documented")
