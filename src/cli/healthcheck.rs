//! `sessiongraph healthcheck`: probes a running server's health URL (the runtime image has
//! no curl).

use clap::Args;

/// Arguments of `sessiongraph healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The health URL to probe (plain HTTP).
    #[arg(
        long,
        env = "SESSIONGRAPH_HEALTHCHECK_URL",
        default_value = "http://127.0.0.1:8080/healthz"
    )]
    pub url: String,
}

/// Why a health probe failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthcheckError {
    /// The URL is not `http://host:port/path`.
    #[error("not a plain http URL: {0}")]
    Url(String),
    /// The server could not be reached or answered garbage.
    #[error("health probe failed: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered another status than 200.
    #[error("unhealthy: {0}")]
    Status(String),
}

/// Probes a health URL with a minimal HTTP/1.1 GET (the runtime image has no curl). Succeeds
/// on a 200 answer within three seconds.
pub fn healthcheck(args: &HealthcheckArgs) -> Result<(), HealthcheckError> {
    use std::io::{Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Duration;

    let rest = args
        .url
        .strip_prefix("http://")
        .ok_or_else(|| HealthcheckError::Url(args.url.clone()))?;
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let addr = authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| HealthcheckError::Url(args.url.clone()))?;
    let timeout = Duration::from_secs(3);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    let status_line = String::from_utf8_lossy(&head).into_owned();
    if status_line.starts_with("HTTP/1.1 200") || status_line.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(HealthcheckError::Status(status_line))
    }
}
