#!/bin/sh
# man-example.sh PAGE PATH: prints the file PATH as the generated man page
# PAGE holds it (tools/man-include.awk put it there), roff escapes undone;
# fails when the page includes no such file.
set -eu
awk -v want="$2" '
        $0 == ".\\\" begin include: " want { inside = 1; found = 1; next }
        inside && $0 == ".\\\" end include" { inside = 0; next }
        inside { sub(/^\\&/, ""); gsub(/\\-/, "-"); gsub(/\\e/, "\\"); print }
        END { if (!found) exit 1 }
' "$1"
