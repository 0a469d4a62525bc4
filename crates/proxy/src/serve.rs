//! One box's proxy at work: the accept loop on its socket (a bounded number of connections at
//! once) and each connection: the head read within its size and time, the target checked, the
//! checked address connected to (never resolved again), a plain request's head sent in origin
//! form, then bytes both ways until either side ends or the tunnel stays idle too long.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::check;
use super::request::host_port;
use super::request::{self, ESTABLISHED, Refusal};
use super::{BoxHosts, Limits};

/// Accepts connections on `listener` until the task is aborted (when the box ends); aborting
/// it drops every connection's task with it. Past the connection limit a connection is
/// answered `503`; past twice the limit (a box that opens connections faster than refusals
/// end, which the socket by path allows beside the relay) it is closed unanswered, so one box
/// never holds more than that many of the broker's descriptors.
pub(super) async fn serve(
    listener: UnixListener,
    hosts: Arc<BoxHosts>,
    mut end_calls: tokio::sync::mpsc::UnboundedReceiver<std::sync::mpsc::SyncSender<()>>,
) {
    let permits = Arc::new(Semaphore::new(hosts.limits.connections));
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            // A call of a warm box is over: every connection ends (aborted tasks note nothing
            // more), then the broker is told.
            Some(done) = end_calls.recv() => {
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                let _ = done.send(());
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if tasks.len() >= hosts.limits.connections.saturating_mul(2) => {
                    drop(stream);
                }
                Ok((stream, _)) => {
                    let hosts = Arc::clone(&hosts);
                    match Arc::clone(&permits).try_acquire_owned() {
                        Ok(permit) => {
                            tasks.spawn(async move {
                                connection(stream, &hosts).await;
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            tasks.spawn(async move {
                                let refusal = Refusal::new(
                                    503,
                                    format!(
                                        "this box already has {} connections through the proxy, the most it may hold at once",
                                        hosts.limits.connections
                                    ),
                                );
                                tracing::warn!(proxy = %hosts.label, reason = %refusal.reason, "proxy: refused a connection");
                                answer(stream, &refusal, hosts.limits.head_time).await;
                            });
                        }
                    }
                }
                Err(error) => {
                    // Out of descriptors, most likely: wait a little rather than spin.
                    tracing::warn!(proxy = %hosts.label, %error, "proxy: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// One connection from the box.
async fn connection(mut stream: UnixStream, hosts: &BoxHosts) {
    let limits = &hosts.limits;
    let (target, rest) = match head(&mut stream, limits).await {
        Ok(Some(target)) => target,
        Ok(None) => return,
        Err(refusal) => return refuse(stream, hosts, None, &refusal).await,
    };
    let request::Target {
        host,
        port,
        forward,
    } = target;
    let target = host_port(&host, port);
    let explicit = match hosts.check.check(&host, port) {
        Ok(explicit) => explicit,
        Err(refusal) => return refuse(stream, hosts, Some(&target), &refusal).await,
    };
    let addresses = match check::resolve(&hosts.resolver, &host, port, limits.resolve_time).await {
        Ok(addresses) => addresses,
        Err(refusal) => return refuse(stream, hosts, Some(&target), &refusal).await,
    };
    // Any address refused refuses the host: a name pointing both outside and inside does not
    // reach inside by the luck of the order.
    if let Some(refusal) = addresses
        .iter()
        .find_map(|ip| check::address_refusal(&host, *ip, explicit))
    {
        return refuse(stream, hosts, Some(&target), &refusal).await;
    }
    let (mut upstream, address) =
        match connect(&target, &addresses, port, limits.connect_time).await {
            Ok(connected) => connected,
            Err(refusal) => return refuse(stream, hosts, Some(&target), &refusal).await,
        };
    let plain = forward.is_some();
    tracing::info!(proxy = %hosts.label, target = %target, %address, plain, "proxy: connected");
    match forward {
        // A plain request: the server gets its head in origin form; no 200 of the proxy's own.
        Some(head) => {
            if upstream.write_all(&head).await.is_err() {
                return;
            }
        }
        None => {
            if stream.write_all(ESTABLISHED).await.is_err() {
                return;
            }
        }
    }
    if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
        return;
    }
    let idle = splice(stream, upstream, limits.idle_time).await;
    tracing::info!(proxy = %hosts.label, target = %target, idle, "proxy: closed");
}

/// The target of the connection's head and the bytes after it, `None` when the box closed the
/// connection before a whole head, or the refusal of a head too long, too slow or wrong.
async fn head(
    stream: &mut UnixStream,
    limits: &Limits,
) -> Result<Option<(request::Target, Vec<u8>)>, Refusal> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 2048];
    let deadline = tokio::time::Instant::now() + limits.head_time;
    let end = loop {
        if let Some(end) = request::head_end(&bytes) {
            break end;
        }
        if bytes.len() > limits.head_bytes {
            return Err(Refusal::new(
                431,
                format!(
                    "the request head is longer than the {} bytes the proxy reads",
                    limits.head_bytes
                ),
            ));
        }
        let read = match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(None),
            Ok(Ok(n)) => n,
            Err(_) => {
                return Err(Refusal::new(
                    408,
                    format!(
                        "the request head did not arrive within {} ms",
                        limits.head_time.as_millis()
                    ),
                ));
            }
        };
        bytes.extend_from_slice(&chunk[..read]);
    };
    if end > limits.head_bytes {
        return Err(Refusal::new(
            431,
            format!(
                "the request head is longer than the {} bytes the proxy reads",
                limits.head_bytes
            ),
        ));
    }
    let target = request::parse_head(&bytes[..end])?;
    Ok(Some((target, bytes.split_off(end))))
}

/// Connects to the first of `addresses` that answers within `limit` in all.
async fn connect(
    target: &str,
    addresses: &[IpAddr],
    port: u16,
    limit: Duration,
) -> Result<(TcpStream, SocketAddr), Refusal> {
    let attempt = async {
        let mut last = None;
        for ip in addresses {
            let address = SocketAddr::new(*ip, port);
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok((stream, address)),
                Err(error) => last = Some(format!("{address}: {error}")),
            }
        }
        Err(last.unwrap_or_else(|| "no address".to_string()))
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(Ok(connected)) => Ok(connected),
        Ok(Err(why)) => Err(Refusal::new(
            502,
            format!("{target}: cannot connect ({why})"),
        )),
        Err(_) => Err(Refusal::new(
            504,
            format!("{target}: no answer within {} ms", limit.as_millis()),
        )),
    }
}

/// Logs a refusal and answers it.
async fn refuse(stream: UnixStream, hosts: &BoxHosts, target: Option<&str>, refusal: &Refusal) {
    tracing::warn!(
        proxy = %hosts.label,
        target = target.unwrap_or("-"),
        status = refusal.status,
        reason = %refusal.reason,
        "proxy: refused a connection"
    );
    hosts.note(target, refusal);
    answer(stream, refusal, hosts.limits.head_time).await;
}

/// What a refused connection may still send that is read and dropped before it is closed.
const LINGER_BYTES: usize = 64 * 1024;

/// Writes `refusal` and closes, giving up after `limit` on a box that does not read. What the
/// box sent past the head is read first (up to [`LINGER_BYTES`]): a socket closed with unread
/// bytes resets, and the box would lose the answer.
async fn answer(mut stream: UnixStream, refusal: &Refusal, limit: Duration) {
    let bytes = refusal.to_bytes();
    let _ = tokio::time::timeout(limit, async {
        let _ = stream.write_all(&bytes).await;
        let _ = stream.shutdown().await;
        let mut drained = 0;
        let mut chunk = [0u8; 4096];
        while drained < LINGER_BYTES {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// Bytes both ways until both directions end, either side fails, or nothing passes for `idle`;
/// returns whether it ended idle.
async fn splice(inner: UnixStream, outer: TcpStream, idle: Duration) -> bool {
    let started = Instant::now();
    let last = AtomicU64::new(0);
    let (inner_read, inner_write) = inner.into_split();
    let (outer_read, outer_write) = outer.into_split();
    let both = async {
        tokio::join!(
            pump(inner_read, outer_write, &last, started),
            pump(outer_read, inner_write, &last, started)
        )
    };
    let watch = async {
        loop {
            let since = started
                .elapsed()
                .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
            if since >= idle {
                return;
            }
            tokio::time::sleep(idle - since).await;
        }
    };
    tokio::select! {
        _ = both => false,
        () = watch => true,
    }
}

/// Copies `from` to `to`, noting when bytes last passed; at the end of `from` it ends `to`'s
/// writing half, so a half-closed tunnel still carries the other way.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    last: &AtomicU64,
    started: Instant,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
        let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        last.store(now, Ordering::Relaxed);
    }
    let _ = to.shutdown().await;
}
