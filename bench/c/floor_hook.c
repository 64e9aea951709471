/*
 * The physical floor of one server-mode hook call, in C: start, read stdin to
 * EOF, make one HTTP/1.1 POST over a fresh loopback TCP connection (one
 * write of head + body on a raw socket), read the whole answer, print `{}`,
 * exit 0. No TLS, no JSON, no config, no allocator, no language runtime
 * beyond libc: what any hook must pay at least.
 *
 *   FLOOR_ADDR=127.0.0.1:PORT FLOOR_PATH=/api/... FLOOR_TOKEN=... floor_hook < payload
 *
 * preloop-bench embeds this file (and floor_io.h, shared with floor_calls.c)
 * and builds it at run time with the system C compiler (`$CC`, else cc, gcc,
 * clang), `-O2`, dynamically and statically linked (bench/src/own_floor.rs,
 * `build`).
 * Any failure exits 1, so a broken floor cannot pass for a fast one.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "floor_io.h"

#define BODY_MAX (1 << 20)
#define RESP_MAX (64 * 1024)

static char body[BODY_MAX];
static char req[BODY_MAX + 4096];
static char resp[RESP_MAX];

int main(void) {
    long got_in = read_stdin(body, sizeof body);
    if (got_in < 0) return 1;
    size_t len = (size_t)got_in;

    const char *addr = getenv("FLOOR_ADDR");
    const char *path = getenv("FLOOR_PATH");
    const char *token = getenv("FLOOR_TOKEN");
    if (!addr || !path || !token) return 1;
    int fd = connect_addr(addr);
    if (fd < 0) return 1;

    int n = snprintf(req, 4096,
                     "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     path, addr, token, len);
    if (n <= 0 || n >= 4096) return 1;
    memcpy(req + n, body, len);
    if (write_all(fd, req, (size_t)n + len) != 0) return 1;

    /* Read the head, then Content-Length bytes of body (or to EOF). */
    size_t got = 0;
    long want = -1;
    for (;;) {
        if (got == sizeof resp) break;
        ssize_t r = read(fd, resp + got, sizeof resp - got);
        if (r < 0) return 1;
        if (r == 0) break;
        got += (size_t)r;
        if (want < 0) {
            char *eoh = memmem(resp, got, "\r\n\r\n", 4);
            if (eoh) {
                long cl = content_length(resp, eoh + 2);
                if (cl >= 0) want = (long)(eoh + 4 - resp) + cl;
            }
        }
        if (want >= 0 && got >= (size_t)want) break;
    }
    if (got < 12 || memcmp(resp, "HTTP/1.1 2", 10) != 0) return 1;
    close(fd);
    return write_all(1, "{}\n", 3) == 0 ? 0 : 1;
}
