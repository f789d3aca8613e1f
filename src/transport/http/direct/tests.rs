use super::response::{Framing, Parsed, Reading, Sse};
use super::Direct;
use reqwest::header::HeaderMap;
use std::time::{Duration, Instant};

fn trust() -> std::sync::Arc<crate::transport::tls::Trust> {
    crate::transport::tls::trust(None).unwrap()
}

#[test]
fn a_host_name_is_looked_up_off_the_callers_thread() {
    let headers = HeaderMap::new();
    // An IP address needs no lookup: the direct path can take the first request.
    for url in ["http://127.0.0.1:9/mcp", "http://[::1]:9/mcp"] {
        let d = Direct::new(&url.parse().unwrap(), &headers, false, &trust()).unwrap();
        assert!(d.addresses_ready(), "{url}");
        assert_eq!(d.addresses().unwrap()[0].port(), 9);
    }
    // A name: the first request goes the general way while a runtime thread looks it up,
    // and the direct path takes the requests after that.
    let d = Direct::new(
        &"http://localhost:9/mcp".parse().unwrap(),
        &headers,
        false,
        &trust(),
    )
    .unwrap();
    assert!(!d.addresses_ready());
    // (The lookup may finish between the two looks.)
    assert!(d.addresses().is_err() || d.addresses_ready());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !d.addresses_ready() {
        assert!(Instant::now() < deadline, "localhost was never looked up");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(d.addresses().unwrap().iter().all(|a| a.ip().is_loopback()));
    // A connect that failed on every address forgets them: looked up again.
    d.forget_addresses();
    assert!(!d.addresses_ready());
}

fn read_all(r: &mut Reading, input: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut ended = false;
    for b in input {
        r.buf.push(*b);
        if let Framing::Head = r.framing {
            match r.head().unwrap() {
                Parsed::More => continue,
                Parsed::Head(..) => {}
            }
        }
        ended = r.body(Some(&mut out), false).unwrap();
    }
    (out, ended)
}

#[test]
fn chunked_bodies_are_decoded_byte_by_byte() {
    let mut r = Reading::new();
    let (out, ended) = read_all(
        &mut r,
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nx-t: 1\r\n\r\n",
    );
    assert_eq!(out, b"hello world");
    assert!(ended && r.keep_alive && r.unread().is_empty());
}

#[test]
fn length_and_close_framing() {
    let mut r = Reading::new();
    let (out, ended) = read_all(
        &mut r,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert_eq!(out, b"abc");
    assert!(ended);
    let mut r = Reading::new();
    let (out, ended) = read_all(&mut r, b"HTTP/1.0 200 OK\r\n\r\nabc");
    assert_eq!(out, b"abc");
    assert!(!ended && !r.keep_alive);
    assert!(r.body(None, true).unwrap());
}

#[test]
fn sse_events_split_anywhere() {
    let text =
        b": comment\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nretry: 5\n\ndata:x\r\rdata: y\n\n";
    for split in 0..text.len() {
        let mut sse = Sse::default();
        let mut got = Vec::new();
        for part in [&text[..split], &text[split..]] {
            sse.feed(part, 1 << 20, &mut |d| {
                got.push(String::from_utf8_lossy(d).into_owned());
                false
            })
            .unwrap();
        }
        assert_eq!(got, ["{\"a\":\n1}", "x", "y"], "split at {split}");
    }
    let mut sse = Sse::default();
    assert!(sse.feed(&[b'a'; 100], 50, &mut |_| false).is_err());
}

#[test]
fn https_urls_take_the_direct_path_with_tls_and_others_do_not() {
    let headers = HeaderMap::new();
    let d = Direct::new(
        &"https://127.0.0.1/mcp".parse().unwrap(),
        &headers,
        false,
        &trust(),
    );
    let d = d.expect("an https URL has a direct path");
    assert!(d.tls.is_some());
    assert_eq!(d.addresses().unwrap()[0].port(), 443, "https's own port");
    let d = Direct::new(
        &"https://[::1]:8443/mcp".parse().unwrap(),
        &headers,
        false,
        &trust(),
    );
    assert!(d.unwrap().tls.is_some());
    let d = Direct::new(
        &"http://127.0.0.1/mcp".parse().unwrap(),
        &headers,
        false,
        &trust(),
    );
    let d = d.unwrap();
    assert!(d.tls.is_none());
    assert_eq!(d.addresses().unwrap()[0].port(), 80);
    // Proxied, with userinfo, or another scheme: the general path's.
    for (url, proxied) in [
        ("https://example.com/mcp", true),
        ("https://u:p@example.com/mcp", false),
        ("ftp://example.com/mcp", false),
    ] {
        let d = Direct::new(&url.parse().unwrap(), &headers, proxied, &trust());
        assert!(d.is_none(), "{url}");
    }
}

/// A TLS server's refusal is a TLS failure (the request then goes by the general path, which
/// explains it); a connection closed during the handshake is not (the next address is tried).
#[test]
fn a_tls_alert_is_a_tls_failure_and_a_close_is_not() {
    use super::link::{is_tls, Link, TlsTo};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let url = "https://localhost/mcp".parse().unwrap();
    let to = TlsTo::new(&url, trust().config.clone()).unwrap();
    // A fatal handshake_failure alert (TLS 1.2 record), or nothing.
    let answers: [(&'static [u8], bool); 2] = [(&[0x15, 3, 3, 0, 2, 2, 40], true), (&[], false)];
    for (answer, tls) in answers {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut hello = [0u8; 2048];
            let _ = s.read(&mut hello).unwrap();
            s.write_all(answer).unwrap();
        });
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut link = Link::tls(sock, &to).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let e = loop {
            assert!(Instant::now() < deadline, "the handshake never ended");
            match link.handshake() {
                Ok(None) => panic!("a handshake with no server succeeded"),
                Ok(Some(ready)) => {
                    crate::sys::fd::wait_ready(link.sock(), ready, Duration::from_secs(1));
                }
                Err(e) => break e,
            }
        };
        server.join().unwrap();
        assert_eq!(is_tls(&e), tls, "{e}");
        if tls {
            let why = crate::transport::tls::reason(&e).unwrap();
            assert!(why.contains("client certificate"), "{why}");
        } else {
            assert!(e.to_string().contains("during the TLS handshake"), "{e}");
        }
    }
}
