/* A browser for the OAuth tests, in C: GETs an http:// URL without following its redirect.
 * Header-only (`static inline`); include it after defining _POSIX_C_SOURCE 200809L. Used by
 * tests/c/oauth.c and the conformance client (tests/conformance/client.c). */
#ifndef MCPLUG_TEST_HTTP_GET_H
#define MCPLUG_TEST_HTTP_GET_H

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Sends `method` (no body) to `url` (http:// only) and reads its answer's head into `buf`
 * (NUL-terminated); returns the bytes read, or -1 when it could not connect or send. */
static inline long http_request_head(const char *method, const char *url, char *buf, size_t cap) {
    if (strncmp(url, "http://", 7) != 0 || cap < 2) return -1;
    const char *hp = url + 7;
    const char *slash = strchr(hp, '/');
    char host[256];
    size_t hl = slash ? (size_t)(slash - hp) : strlen(hp);
    if (hl >= sizeof host) return -1;
    memcpy(host, hp, hl);
    host[hl] = '\0';
    char *colon = strrchr(host, ':');
    const char *port = "80";
    if (colon) {
        *colon = '\0';
        port = colon + 1;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    /* An address needs no lookup (and no resolver state in the calling thread, which glibc
     * does not always free at the thread's end: valgrind counts it lost). */
    if (host[0] >= '0' && host[0] <= '9') hints.ai_flags = AI_NUMERICHOST;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return -1;
    size_t n = strlen(url) + 512;
    char *req = malloc(n);
    if (req == NULL) abort();
    int len = snprintf(req, n, "%s %s HTTP/1.1\r\nHost: %.*s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                       method, slash ? slash : "/", (int)hl, hp);
    if (write(fd, req, (size_t)len) != len) {
        free(req);
        close(fd);
        return -1;
    }
    free(req);
    size_t got = 0;
    ssize_t r;
    buf[0] = '\0';
    while (got < cap - 1 && (r = read(fd, buf + got, cap - 1 - got)) > 0) {
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n")) break;
    }
    close(fd);
    buf[got] = '\0';
    return (long)got;
}

/* GETs `url` and reads its answer's head (see http_request_head). */
static inline long http_get_head(const char *url, char *buf, size_t cap) {
    return http_request_head("GET", url, buf, cap);
}

/* The Location of `url`'s answer (malloc'd), or NULL: what a browser does at an authorization
 * server whose /authorize redirects at once (no login page). */
static inline char *location_of(const char *url) {
    char buf[16384];
    if (http_get_head(url, buf, sizeof buf) <= 0) return NULL;
    for (char *line = strstr(buf, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "location:", 9) == 0) {
            char *v = line + 11;
            while (*v == ' ') v++;
            char *end = strstr(v, "\r\n");
            return strndup(v, end ? (size_t)(end - v) : strlen(v));
        }
    }
    return NULL;
}

/* GETs `url` as a browser coming back to a callback: 0 when an HTTP answer came. */
static inline int http_get(const char *url) {
    char buf[4096];
    return http_get_head(url, buf, sizeof buf) >= 12 && strncmp(buf, "HTTP/1.", 7) == 0 ? 0 : -1;
}

#endif
