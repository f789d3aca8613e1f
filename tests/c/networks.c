/* Company networks through the C ABI: server-everything (Streamable HTTP) behind nginx with TLS
 * from a private CA made at test time (tests/servers/tls_front.py). Shown: refused without the
 * CA, the error naming the host, the reason and what was trusted; connected with the entry's
 * `tls.ca_file` and with the connection's `tls` option; behind nginx requiring a client
 * certificate, connected with `tls.client_cert`/`client_key`, and with an encrypted key and its
 * passphrase; through tinyproxy (a CONNECT tunnel in its log), HTTPS_PROXY with and without NO_PROXY
 * naming the host, a proxy that is down, one that wants credentials; a bad `tls` option named. */
#include "check.h"

static mcplug_client *try_connect(const char *url, const char *tls, const char *options, char **out) {
    char server[4096];
    mcplug_client *c = NULL;
    if (tls)
        snprintf(server, sizeof server, "{\"type\":\"http\",\"url\":\"%s\",\"tls\":%s}", url, tls);
    else
        snprintf(server, sizeof server, "{\"type\":\"http\",\"url\":\"%s\"}", url);
    mcplug_client_connect(server, options, &c, out);
    return c;
}

static void echo_over(mcplug_client *c, const char *what) {
    char *out = NULL;
    mcplug_status st = mcplug_client_call_tool(c, "echo", "{\"message\":\"tls\"}", NULL, &out);
    CHECK_OUT(st == MCPLUG_OK && contains(out, "Echo: tls"), out, "echo over TLS (%s)", what);
    drop(&out);
}

int main(void) {
    char url[512], mtls[512], tls[4096], options[4096];
    const char *ca = peer("MCPLUG_TLS_CA");
    char *out = NULL;
    mcplug_client *c;

    test_init();
    snprintf(url, sizeof url, "https://localhost:%s/mcp", peer("MCPLUG_TLS_HTTPS_PORT"));
    snprintf(mtls, sizeof mtls, "https://localhost:%s/mcp", peer("MCPLUG_TLS_MTLS_PORT"));

    c = try_connect(url, NULL, NULL, &out);
    CHECK_OUT(c == NULL && is_error(out, "transport", "unknown issuer") && contains(out, "the TLS connection to localhost failed") &&
                  contains(out, "trusted: "),
              out, "a private CA is refused, the error naming host, reason and trust");
    drop(&out);

    snprintf(tls, sizeof tls, "{\"ca_file\":\"%s\"}", ca);
    c = try_connect(url, tls, NULL, &out);
    CHECK_OUT(c != NULL, out, "the entry's tls.ca_file trusts it");
    drop(&out);
    if (c) {
        echo_over(c, "entry tls");
        mcplug_client_free(c);
    }
    snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"}}", ca);
    c = try_connect(url, NULL, options, &out);
    CHECK_OUT(c != NULL, out, "the connection's tls option trusts it");
    drop(&out);
    if (c) {
        echo_over(c, "connection tls");
        mcplug_client_free(c);
    }

    snprintf(tls, sizeof tls, "{\"ca_file\":\"%s\",\"client_cert\":\"%s\",\"client_key\":\"%s\"}", ca, peer("MCPLUG_TLS_CLIENT_CERT"),
             peer("MCPLUG_TLS_CLIENT_KEY"));
    c = try_connect(mtls, tls, NULL, &out);
    CHECK_OUT(c != NULL, out, "a client certificate where nginx requires one");
    drop(&out);
    if (c) {
        echo_over(c, "client certificate");
        mcplug_client_free(c);
    }
    snprintf(tls, sizeof tls,
             "{\"ca_file\":\"%s\",\"client_cert\":\"%s\",\"client_key\":\"%s\",\"client_key_passphrase\":\"%s\"}", ca,
             peer("MCPLUG_TLS_CLIENT_CERT"), peer("MCPLUG_TLS_CLIENT_KEY_ENC"), peer("MCPLUG_TLS_PASSPHRASE"));
    c = try_connect(mtls, tls, NULL, &out);
    CHECK_OUT(c != NULL, out, "an encrypted client key with its passphrase");
    drop(&out);
    if (c) {
        echo_over(c, "encrypted key");
        mcplug_client_free(c);
    }

    /* Through the proxy (the connection's `proxy` option): a CONNECT tunnel, seen in its log. */
    snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"},\"proxy\":\"http://127.0.0.1:%s\"}", ca,
             peer("MCPLUG_PROXY_PORT"));
    c = try_connect(url, NULL, options, &out);
    CHECK_OUT(c != NULL, out, "connected through the proxy");
    drop(&out);
    if (c) {
        echo_over(c, "through the proxy");
        mcplug_client_free(c);
    }
    {
        FILE *f = fopen(peer("MCPLUG_PROXY_LOG"), "r");
        char log[65536], want[128];
        size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
        if (f) fclose(f);
        log[n] = '\0';
        snprintf(want, sizeof want, "CONNECT localhost:%s", peer("MCPLUG_TLS_HTTPS_PORT"));
        CHECK(contains(log, want), "the proxy's log shows the tunnel (%s)", want);
    }
    snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"},\"proxy\":\"http://u:s3cret@127.0.0.1:1\"}", ca);
    c = try_connect(url, NULL, options, &out);
    CHECK_OUT(c == NULL && is_error(out, "transport", "through the proxy http://127.0.0.1:1") && !contains(out, "s3cret"), out,
              "a proxy that is down is named, without its credentials");
    drop(&out);

    /* The environment's proxy, and NO_PROXY naming the host (a dead proxy shows which way it went). */
    snprintf(tls, sizeof tls, "{\"ca_file\":\"%s\"}", ca);
    setenv("HTTPS_PROXY", "http://127.0.0.1:1", 1);
    setenv("NO_PROXY", "localhost", 1);
    c = try_connect(url, tls, NULL, &out);
    CHECK_OUT(c != NULL, out, "NO_PROXY=localhost goes around HTTPS_PROXY");
    drop(&out);
    if (c) {
        echo_over(c, "NO_PROXY");
        mcplug_client_free(c);
    }
    setenv("NO_PROXY", "example.com,10.0.0.0/8", 1);
    c = try_connect(url, tls, NULL, &out);
    CHECK_OUT(c == NULL && is_error(out, "transport", "through the proxy http://127.0.0.1:1"), out,
              "a NO_PROXY that does not name the host leaves it to HTTPS_PROXY");
    drop(&out);
    unsetenv("NO_PROXY");
    unsetenv("HTTPS_PROXY");

    /* A proxy that wants credentials: a 407 explained, the credentials never shown, then through it. */
    {
        const char *auth = peer("MCPLUG_GUARDED_PROXY_AUTH"), *port = peer("MCPLUG_GUARDED_PROXY_PORT");
        snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"},\"proxy\":\"http://127.0.0.1:%s\"}", ca, port);
        c = try_connect(url, NULL, options, &out);
        CHECK_OUT(c == NULL && is_error(out, "transport", "407") && contains(out, "credentials"), out,
                  "a proxy wanting credentials: its 407 explained");
        drop(&out);
        snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"},\"proxy\":\"http://alice:wr0ng@127.0.0.1:%s\"}", ca,
                 port);
        c = try_connect(url, NULL, options, &out);
        CHECK_OUT(c == NULL && !contains(out, "wr0ng"), out, "wrong credentials refused, never shown");
        drop(&out);
        snprintf(options, sizeof options, "{\"tls\":{\"ca_file\":\"%s\"},\"proxy\":\"http://%s@127.0.0.1:%s\"}", ca, auth, port);
        c = try_connect(url, NULL, options, &out);
        CHECK_OUT(c != NULL, out, "through the proxy with its credentials");
        drop(&out);
        if (c) {
            echo_over(c, "with the proxy's credentials");
            mcplug_client_free(c);
        }
    }

    c = try_connect(url, "{\"ca\":\"x\"}", NULL, &out);
    CHECK_OUT(c == NULL && is_error(out, "invalid_argument", "unknown key `ca`"), out, "a bad tls option is named");
    drop(&out);
    return finish("networks");
}
