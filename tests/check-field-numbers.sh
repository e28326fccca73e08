#!/bin/sh
# A protobuf field number is written in protos/ and in the headers pbgen
# generates from them, nowhere else (HACKING.md, "Writing packets"). A
# packet is built with the typed writers (TracePacket_set_timestamp()); a
# field chosen at run time goes through the generic calls of
# <traced/pbzero.h> (or libtraced-client's traced_msg_*) with a generated
# Message_FIELD_name constant. This fails on a generic call given a number
# instead: a literal, or a macro that the same file defines as one. One
# line per offence.
#
#   tests/check-field-numbers.sh [TOPDIR]
# Looks at the sources of daemons/, plugins/, lib/, tools/ and examples/;
# include/traced/pbzero.h is the writer itself and is left out.
set -eu
top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$top"
dirs=
for d in daemons plugins lib tools examples; do
        [ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086 # one word per folder
files=$(find $dirs -name '*.[ch]' ! -name '*.pb-c.*' ! -name '*.skel.h' ! -name 'vmlinux.h' | sort)
[ -n "$files" ] || { echo "FAIL: no sources under $top"; exit 1; }
# shellcheck disable=SC2086
hits=$(perl -0777 -ne '
        my $src = $_;
        # Macros of this file that stand for a number.
        my %num;
        $num{$1} = 1 while $src =~ /^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*\)?[ \t]*(?:\/[*\/].*)?$/mg;
        my $lit = qr/\(?\s*(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?/;
        # The field is the second argument of the generic writers and the
        # first of traced_pb_tag(); the first argument is a message, one
        # level of parentheses deep at most.
        my $first = qr/(?:[^,()]|\((?:[^()]|\([^()]*\))*\))*/;
        # pbw_*() was the hand-written writer before the typed ones.
        my $calls = qr/\b(traced_pb_msg_(?:varint|fixed32|fixed64|len_header|bytes|string|begin_nested|tag_varint_slow)|traced_msg_(?:append_varint|append_bytes|begin_nested)|pbw_\w+)\s*\(\s*$first,\s*(\w+|$lit)\s*[,)]/;
        while ($src =~ /$calls/g) {
                my ($fn, $arg, $at) = ($1, $2, $-[0]);
                next unless $arg =~ /^$lit$/ || $num{$arg};
                my $line = 1 + (substr($src, 0, $at) =~ tr/\n//);
                print "$ARGV:$line: $fn() given field number $arg\n";
        }
        while ($src =~ /\btraced_pb_tag\s*\(\s*(\w+|$lit)\s*,/g) {
                my ($arg, $at) = ($1, $-[0]);
                next unless $arg =~ /^$lit$/ || $num{$arg};
                my $line = 1 + (substr($src, 0, $at) =~ tr/\n//);
                print "$ARGV:$line: traced_pb_tag() given field number $arg\n";
        }
' $files)
if [ -n "$hits" ]; then
        echo "$hits"
        echo "FAIL: field numbers outside protos/ and the generated writers (use the typed writers or a generated *_FIELD_* constant)"
        exit 1
fi
echo "ok: no field number outside protos/ and the generated writers ($(echo "$files" | wc -l) files)"
