/*
 * What both C floors (floor_hook.c, floor_calls.c) do the same way: read
 * stdin, write all of a buffer, find a response's Content-Length, connect to
 * FLOOR_ADDR. preloop-bench writes this file beside either source before it
 * builds it (bench/src/own_floor.rs, `build`). Plain libc; every failure is
 * a negative return, which each floor turns into exit 1.
 */
#ifndef PRELOOP_FLOOR_IO_H
#define PRELOOP_FLOOR_IO_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Read fd 0 to EOF (or until `cap` bytes) into `buf`; its length, or -1. */
static long read_stdin(char *buf, size_t cap) {
    size_t len = 0;
    for (;;) {
        ssize_t r = read(0, buf + len, cap - len);
        if (r < 0) return -1;
        if (r == 0) break;
        len += (size_t)r;
        if (len == cap) break;
    }
    return (long)len;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Content-Length of a response head (any case), or -1. */
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

/* A TCP connection to `addr` ("IPv4:port", e.g. FLOOR_ADDR), or -1. */
static int connect_addr(const char *addr) {
    const char *colon = strrchr(addr, ':');
    if (!colon || colon - addr >= 64) return -1;
    char host[64];
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

#endif
