//! Who may use the page: the token (required on a non-loopback address), the `Host` check
//! (a loopback server answers only to loopback names, so a DNS-rebinding page cannot reach it)
//! and the WebSocket `Origin` check (a page from elsewhere cannot drive the show through the
//! visitor's browser). Pure functions of the request's text, tested below.

use std::io::Read;

/// A fresh token: 16 random bytes from `/dev/urandom` as 32 hex digits.
pub fn generate_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The value of `key` in a URL query string (`a=1&token=xyz`), undecoded (tokens are hex).
pub fn query_value<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then_some(v)
    })
}

/// Compares without stopping at the first difference (the time taken does not tell how much
/// of a guessed token was right).
pub fn same_token(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, expected) in b.iter().enumerate() {
        diff |= (a.get(i).copied().unwrap_or(0) ^ expected) as usize;
    }
    diff == 0
}

/// The name of the cookie that carries the token for the server on `host_header`'s port
/// (`framepipe-token-8080`): browsers share cookies between the ports of one host, so two
/// servers on one machine keep a cookie each.
pub fn cookie_name(host_header: &str) -> String {
    let authority = host_header.trim();
    let after_host = authority
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']').map(|(_, tail)| tail))
        .unwrap_or(authority);
    let port = after_host
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        .unwrap_or("80");
    format!("framepipe-token-{port}")
}

/// What the cookie holds for `token`: its bytes as hex digits (a token given with
/// `--web-token` may hold characters that a cookie value cannot).
pub fn cookie_value(token: &str) -> String {
    token.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The value of cookie `name` in a `Cookie` header (`a=1; framepipe-token-80=ab`).
pub fn cookie<'a>(cookie_header: &'a str, name: &str) -> Option<&'a str> {
    cookie_header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// The `Set-Cookie` value that lets a browser which opened the page with the token load its
/// assets, preview and WebSocket without it: for this server only (`Path=/`, no `Domain`),
/// unreadable by scripts (`HttpOnly`), never sent by another site's page (`SameSite=Strict`),
/// gone when the browser closes (no `Max-Age`).
pub fn set_cookie(host_header: &str, token: &str) -> String {
    format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        cookie_name(host_header),
        cookie_value(token)
    )
}

/// The host part of a `Host` header or URL authority (`127.0.0.1:8080` → `127.0.0.1`,
/// `[::1]:80` → `::1`).
fn host_part(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether a `Host` header names this machine's loopback (`localhost`, `127.x.y.z`, `::1`).
pub fn is_loopback_host(host_header: &str) -> bool {
    let h = host_part(host_header.trim());
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a WebSocket `Origin` (`http://HOST:PORT`) is the page's own: its authority equals
/// the request's `Host` header. `null` and other schemes are refused.
pub fn origin_matches_host(origin: &str, host_header: &str) -> bool {
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|a| {
        a.trim_end_matches('/')
            .eq_ignore_ascii_case(host_header.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn query_values_are_found_by_key() {
        assert_eq!(query_value(Some("a=1&token=xyz"), "token"), Some("xyz"));
        assert_eq!(query_value(Some("token="), "token"), Some(""));
        assert_eq!(query_value(Some("tokens=1"), "token"), None);
        assert_eq!(query_value(None, "token"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
        assert!(!same_token("abcd", "abc"));
        assert!(!same_token("", "abc"));
    }

    #[test]
    fn the_token_cookie_is_per_port_and_found_among_others() {
        assert_eq!(cookie_name("127.0.0.1:8080"), "framepipe-token-8080");
        assert_eq!(cookie_name("[::1]:9"), "framepipe-token-9");
        assert_eq!(cookie_name("[::1]"), "framepipe-token-80");
        assert_eq!(cookie_name("tablet.local"), "framepipe-token-80");
        assert_eq!(cookie_value("a;b"), "613b62");
        let header = "x=1; framepipe-token-8080=616263; framepipe-token-8081=ff";
        assert_eq!(cookie(header, "framepipe-token-8080"), Some("616263"));
        assert_eq!(cookie(header, "framepipe-token-80"), None);
        let set = set_cookie("127.0.0.1:8080", "abc");
        assert_eq!(
            set,
            "framepipe-token-8080=616263; Path=/; HttpOnly; SameSite=Strict"
        );
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "localhost:8080",
            "127.0.0.1:1",
            "127.3.2.1",
            "[::1]:80",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["evil.example:8080", "10.0.0.1:8080", "[fe80::1]:80", ""] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn origins_must_be_the_pages_host() {
        assert!(origin_matches_host(
            "http://127.0.0.1:8080",
            "127.0.0.1:8080"
        ));
        assert!(!origin_matches_host(
            "http://127.0.0.1:8081",
            "127.0.0.1:8080"
        ));
        assert!(!origin_matches_host(
            "http://evil.example",
            "127.0.0.1:8080"
        ));
        assert!(!origin_matches_host("null", "127.0.0.1:8080"));
    }
}
