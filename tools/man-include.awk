# Makes a man page's `.\" include: PATH` line the file PATH (under srcdir)
# escaped for roff, between `.\" begin include: PATH` and `.\" end
# include`, where tests/man-example.sh finds it again: the page shows the
# file itself, so the two cannot drift apart.
/^\.\\" include: / {
        path = $3
        file = srcdir "/" path
        print ".\\\" begin include: " path
        n = 0
        while ((r = (getline line < file)) > 0) {
                gsub(/\\/, "\\e", line)
                gsub(/-/, "\\-", line)
                if (line ~ /^[.']/)
                        line = "\\&" line
                print line
                n++
        }
        if (r < 0 || n == 0) {
                print "man-include.awk: cannot read " file > "/dev/stderr"
                exit 1
        }
        close(file)
        print ".\\\" end include"
        next
}
{ print }
