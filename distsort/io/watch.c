/* The guard's watcher (io/guard.py) as a small program: it reads records from its stdin, each
   HELD ('+') or RELEASED ('-'), a path and a NUL, and once the pipe closes (the rank exited,
   however: SIGKILL too) it removes the paths still held. It ignores the launcher's signals and
   runs in a session of its own, so it outlives the rank that started it.

   Why a program: a Python watcher (`python -I -S -c ...`, guard._WATCHER, still the fallback
   where no C compiler works) costs each rank ~20 ms of CPU to start, and its start held up
   the rank's init by 40-55 ms with four ranks on two cores (bench/RESULTS.md, session 53);
   this one starts in about a millisecond. A rank holds a few files: a list will do. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char **held;
static size_t count, room;

static void note(const char *record, size_t n) {
  if (n < 1) return;
  const char *path = record + 1;
  for (size_t i = 0; i < count; i++)
    if (strcmp(held[i], path) == 0) {  /* held already: a release drops it */
      if (record[0] == '-') {
        free(held[i]);
        held[i] = held[--count];
      }
      return;
    }
  if (record[0] != '+') return;
  if (count == room) {
    char **more = realloc(held, (room ? 2 * room : 16) * sizeof *held);
    if (!more) return;
    held = more;
    room = room ? 2 * room : 16;
  }
  char *copy = strdup(path);
  if (copy) held[count++] = copy;
}

int main(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  if (!buf) return 1;
  for (;;) {
    if (len == cap) {
      char *more = realloc(buf, 2 * cap);
      if (!more) break;
      buf = more;
      cap *= 2;
    }
    ssize_t got = read(0, buf + len, cap - len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    len += (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < len; i++)
      if (buf[i] == '\0') {
        note(buf + start, i - start);
        start = i + 1;
      }
    memmove(buf, buf + start, len - start);
    len -= start;
  }
  for (size_t i = 0; i < count; i++) unlink(held[i]);
  return 0;
}
