/*
 * The physical floor of ONE hook, in C: start, read stdin to EOF, make the
 * very server calls that hook makes, in the same order, on ONE keep-alive
 * loopback TCP connection (each request's head and body in one write, its
 * answer read whole before the next is sent), print `{}`, exit 0. A hook
 * that makes no call before it exits (a server-mode SessionEnd hands its
 * calls to a detached worker) gets a floor that makes none. Nothing can be
 * faster without making fewer calls.
 *
 *   FLOOR_ADDR=127.0.0.1:PORT FLOOR_TOKEN=... floor_calls <floor index> < payload
 *
 * The calls are not written here: preloop-bench runs every hook once against
 * its fake server, reads what the server received (method, path, headers,
 * body; bench/src/main.rs, `derive_calls`) and generates floor_calls.h with
 * one table per hook, then builds this file with the system C compiler,
 * `-O2 -static` where a static C library is installed (as the hooks are
 * linked), else dynamically (the benchmark says which). Any failure (a
 * refused connection, a non-2xx answer) exits 1, so a broken floor cannot
 * pass for a fast one.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "floor_io.h"

struct call {
    const char *method;
    const char *path;
    /* The other header lines the hook sent ("name: value\r\n" each), or "". */
    const char *headers;
    /* Whether the hook sent `Authorization: Bearer <its token>`. */
    int bearer;
    const char *body;
    size_t body_len;
};

struct floor {
    const char *hook;
    size_t ncalls;
    const struct call *calls;
};

#include "floor_calls.h"

#define STDIN_MAX (1 << 20)
#define REQ_MAX (1 << 20)
#define RESP_MAX (64 * 1024)

static char in[STDIN_MAX];
static char req[REQ_MAX];
static char resp[RESP_MAX];

/* Send one request and read its whole answer (head, then Content-Length
 * bytes; 1xx/204/304 have no body). 0 if the answer is a 2xx. */
static int call(int fd, const struct call *c, const char *addr, const char *token) {
    int n;
    if (c->bearer)
        n = snprintf(req, 4096, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%sContent-Length: %zu\r\n\r\n",
                     c->method, c->path, addr, token, c->headers, c->body_len);
    else
        n = snprintf(req, 4096, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n\r\n", c->method, c->path, addr,
                     c->headers, c->body_len);
    if (n <= 0 || n >= 4096 || c->body_len > sizeof req - (size_t)n) return -1;
    memcpy(req + n, c->body, c->body_len);
    if (write_all(fd, req, (size_t)n + c->body_len) != 0) return -1;

    size_t got = 0;
    long want = -1;
    for (;;) {
        if (got == sizeof resp) return -1;
        ssize_t r = read(fd, resp + got, sizeof resp - got);
        if (r <= 0) return -1;
        got += (size_t)r;
        if (want < 0) {
            char *eoh = memmem(resp, got, "\r\n\r\n", 4);
            if (eoh) {
                if (got < 12 || memcmp(resp, "HTTP/1.1 2", 10) != 0) return -1;
                int no_body = memcmp(resp + 9, "204", 3) == 0 || memcmp(resp + 9, "304", 3) == 0;
                long cl = no_body ? 0 : content_length(resp, eoh + 2);
                if (cl < 0) return -1; /* the fake always sends a length */
                want = (long)(eoh + 4 - resp) + cl;
            }
        }
        if (want >= 0 && got >= (size_t)want) return got == (size_t)want ? 0 : -1;
    }
}

int main(int argc, char **argv) {
    if (read_stdin(in, sizeof in) < 0) return 1;
    if (argc < 2) return 1;
    size_t k = (size_t)atoi(argv[1]);
    if (k >= sizeof FLOORS / sizeof FLOORS[0]) return 1;
    const struct floor *f = &FLOORS[k];

    if (f->ncalls > 0) {
        const char *addr = getenv("FLOOR_ADDR");
        const char *token = getenv("FLOOR_TOKEN");
        if (!addr || !token) return 1;
        int fd = connect_addr(addr);
        if (fd < 0) return 1;
        for (size_t i = 0; i < f->ncalls; i++)
            if (call(fd, &f->calls[i], addr, token) != 0) return 1;
        close(fd);
    }
    return write_all(1, "{}\n", 3) == 0 ? 0 : 1;
}
