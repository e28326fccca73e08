#!/bin/sh
# Busy as a shell for a moment (so the sampler meets this process and its
# maps before the exec), then becomes the program given, as wrappers such
# as pyenv's shims do.
i=0
while [ "$i" -lt 20000 ]; do
        i=$((i + 1))
done
exec "$@"
