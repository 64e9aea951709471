/*
 * The physical floor of one server-mode hook call, in C: start, read stdin to
 * EOF, make one HTTP/1.1 POST over a fresh loopback TCP connection (one
 * write of head + body on a raw socket), read the whole answer, print `{}`,
 * exit 0. No TLS, no JSON, no config, no allocator, no language runtime
 * beyond libc: what any hook must pay at least.
 *
 *   FLOOR_ADDR=127.0.0.1:PORT FLOOR_PATH=/api/... FLOOR_TOKEN=... floor_hook < payload
 *
 * preloop-bench embeds this file and builds it at run time with the
 * system C compiler (`$CC`, else cc, gcc, clang), `-O2`, dynamically linked
 * against the same libc as the hooks (bench/src/main.rs, `build_c_floor`).
 * Any failure exits 1, so a broken floor cannot pass for a fast one.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY_MAX (1 << 20)
#define RESP_MAX (64 * 1024)

static char body[BODY_MAX];
static char req[BODY_MAX + 4096];
static char resp[RESP_MAX];

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Content-Length of a response head (lower- or mixed-case name), or -1. */
static long content_length(const char *head, const char *end) {
    static const char name[] = "\ncontent-length:";
    for (const char *p = head; p + sizeof name - 1 < end; p++) {
        size_t i = 0;
        while (i < sizeof name - 1) {
            char c = p[i];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != name[i]) break;
            i++;
        }
        if (i == sizeof name - 1) return strtol(p + i, NULL, 10);
    }
    return -1;
}

int main(void) {
    size_t len = 0;
    for (;;) {
        ssize_t r = read(0, body + len, sizeof body - len);
        if (r < 0) return 1;
        if (r == 0) break;
        len += (size_t)r;
        if (len == sizeof body) break;
    }

    const char *addr = getenv("FLOOR_ADDR");
    const char *path = getenv("FLOOR_PATH");
    const char *token = getenv("FLOOR_TOKEN");
    if (!addr || !path || !token) return 1;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon - addr >= 64) return 1;
    char host[64];
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;

    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) return 1;

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
