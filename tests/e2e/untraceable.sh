#!/usr/bin/env bash
# untraceable.sh - `swagent run` on programs LD_PRELOAD cannot trace (issue 33): it says so on
# stderr before the exec, with the reason, and still runs the program unchanged (its output
# and exit status):
#  - a statically linked C program (built here with $CC -static): no ELF interpreter;
#  - a Go program: built here with `go build` when Go is installed, and always a C program
#    carrying Go's build id note (`.note.go.buildid`, owner "Go", type 4) in a PT_NOTE segment,
#    which is what the check reads;
#  - a 32-bit program (the 64-bit library cannot be loaded into it);
#  - no warning for an ordinary dynamically linked program or a shell script.
E2E_NAME=untraceable
. "$E2E_DIR/lib.sh"
e2e_init
CC=${CC:-cc}
cat >"$T/hello.c" <<'C'
#include <stdio.h>
#ifdef FAKE_GO
/* Go's build id note: namesz 3 ("Go"), descsz 8, type 4 (ELF note layout, 4-byte aligned). */
__attribute__((used, section(".note.go.buildid"), aligned(4))) static const struct {
    unsigned namesz, descsz, type;
    char name[4], desc[8];
} go_note = {3, 8, 4, "Go", "abcdefgh"};
#endif
int main(void) { puts("hello ran"); return 7; }
C
"$CC" -static -o "$T/static_hello" "$T/hello.c" 2>"$T/cc.err" || fail "cannot build a static program: $(cat "$T/cc.err")"
"$CC" -o "$T/dyn_hello" "$T/hello.c" || fail "cannot build a dynamic program"
"$CC" -DFAKE_GO -o "$T/fake_go" "$T/hello.c" || fail "cannot build the Go-note program"
readelf -lW "$T/fake_go" | grep -q '\.note\.go\.buildid' ||
    fail "the Go note is not in a segment: $(readelf -lW "$T/fake_go")"
printf '#!/bin/sh\necho script ran\nexit 7\n' >"$T/script.sh"
chmod +x "$T/script.sh"

# run_case NAME PROGRAM WANT_STDOUT 'stderr pattern' | '' (no warning)
run_case() {
    local name=$1 prog=$2 want=$3 pat=$4 out rc
    out=$("$SWAGENT_CLI" run --service u-$name --collector 127.0.0.1:1 -- "$prog" 2>"$T/$name.err")
    rc=$?
    [ "$rc" = 7 ] || fail "$name: exit status $rc, not the program's 7"
    [ "$out" = "$want" ] || fail "$name: stdout '$out'"
    if [ -n "$pat" ]; then
        grep -q "$pat" "$T/$name.err" || fail "$name: no warning on stderr: $(cat "$T/$name.err")"
    elif grep -q 'NOT traced' "$T/$name.err"; then
        fail "$name: a warning for a traceable program: $(cat "$T/$name.err")"
    fi
    echo "$name: $(cat "$T/$name.err")"
}
run_case static "$T/static_hello" "hello ran" \
    "^swagent: $T/static_hello is statically linked (no ELF interpreter): it is NOT traced"
run_case fakego "$T/fake_go" "hello ran" "^swagent: $T/fake_go is a Go program: it is NOT traced"
run_case dynamic "$T/dyn_hello" "hello ran" ""
run_case script "$T/script.sh" "script ran" ""
# A bare name is looked up in PATH, as the exec does.
PATH=$T:$PATH run_case static_path static_hello "hello ran" "is statically linked"

# A 32-bit program (no -m32 toolchain needed: a copy whose ELF class byte says 32-bit; the
# kernel then refuses to run it, but the warning comes first).
cp "$T/dyn_hello" "$T/elf32"
printf '\001' | dd of="$T/elf32" bs=1 seek=4 conv=notrunc status=none
"$SWAGENT_CLI" run -- "$T/elf32" >/dev/null 2>"$T/elf32.err" && fail "elf32: the corrupt copy ran"
grep -q "^swagent: $T/elf32 is a 32-bit program: it is NOT traced" "$T/elf32.err" ||
    fail "elf32: no warning: $(cat "$T/elf32.err")"

GO=$(command -v go || ls /usr/local/go/bin/go /usr/lib/go/bin/go 2>/dev/null | head -n 1)
if [ -n "$GO" ]; then
    mkdir -p "$T/go"
    printf 'package main\n\nimport "os"\n\nfunc main() { os.Stdout.WriteString("go ran\\n"); os.Exit(7) }\n' >"$T/go/main.go"
    (cd "$T/go" && GOCACHE=${TMPDIR:-/tmp}/swagent-test-gocache GOPATH=$T/gopath HOME=$T \
        GOFLAGS=-modcacherw GOTOOLCHAIN=local "$GO" build -o "$T/gohello" main.go) >"$T/go.err" 2>&1 ||
        fail "go build failed: $(cat "$T/go.err")"
    run_case go "$T/gohello" "go ran" "^swagent: $T/gohello is a Go program: it is NOT traced"
else
    echo "NOTE: no Go toolchain on this machine: the Go check was run on the crafted note only"
fi
echo "ok untraceable"
