//! An HTTP proxy that passes every request to one upstream server and, once armed, holds back
//! the answer to the first request matching a method and a path: the upstream has done the work
//! (created the account), the caller never learns it did. A test then kills the caller and
//! checks that its next run adopts what was made instead of making it twice.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tokio::sync::Notify;
use warp::Filter;
use warp::http::{HeaderMap, Method, Response, StatusCode};

#[derive(Debug, Default)]
struct Rule {
    method: Option<Method>,
    path: String,
    /// Whether the first matching answer was held already (a rule holds once).
    used: bool,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct HoldProxy {
    addr: SocketAddr,
    rule: Arc<Mutex<Option<Rule>>>,
    held: Arc<Notify>,
    server: tokio::task::JoinHandle<()>,
}

impl HoldProxy {
    /// Starts a proxy on a free loopback port in front of `upstream` (`http://host:port`).
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start(upstream: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding the hold proxy")?;
        let addr = listener.local_addr().context("the hold proxy's address")?;
        let rule: Arc<Mutex<Option<Rule>>> = Arc::default();
        let held = Arc::new(Notify::new());
        let (client, upstream) = (reqwest::Client::new(), upstream.trim_end_matches('/').to_owned());
        let (rule_in, held_in) = (rule.clone(), held.clone());
        let route = warp::method()
            .and(warp::path::full())
            .and(warp::query::raw().or(warp::any().map(String::new)).unify())
            .and(warp::header::headers_cloned())
            .and(warp::body::bytes())
            .then(
                move |method: Method,
                      path: warp::path::FullPath,
                      query: String,
                      headers: HeaderMap,
                      body: bytes::Bytes| {
                    let (client, upstream, rule, held) =
                        (client.clone(), upstream.clone(), rule_in.clone(), held_in.clone());
                    async move {
                        let target = if query.is_empty() {
                            format!("{upstream}{}", path.as_str())
                        } else {
                            format!("{upstream}{}?{query}", path.as_str())
                        };
                        let mut forwarded = headers.clone();
                        forwarded.remove(warp::http::header::HOST);
                        let answer = client.request(method.clone(), target).headers(forwarded).body(body).send().await;
                        let hold = {
                            let mut rule = rule.lock().expect("rule lock");
                            match rule.as_mut() {
                                Some(r)
                                    if !r.used
                                        && r.path == path.as_str()
                                        && r.method.as_ref().is_none_or(|m| *m == method) =>
                                {
                                    r.used = true;
                                    true
                                }
                                _ => false,
                            }
                        };
                        if hold {
                            held.notify_one();
                            std::future::pending::<()>().await;
                        }
                        match answer {
                            Ok(answer) => {
                                let mut response = Response::builder().status(answer.status());
                                for (name, value) in answer.headers() {
                                    response = response.header(name, value);
                                }
                                let body = answer.bytes().await.unwrap_or_default();
                                response.body(body.to_vec()).expect("a copied response")
                            }
                            Err(err) => Response::builder()
                                .status(StatusCode::BAD_GATEWAY)
                                .body(format!("hold proxy: {err}").into_bytes())
                                .expect("a bad gateway response"),
                        }
                    }
                },
            );
        let server = tokio::spawn(warp::serve(route).incoming(listener).run());
        Ok(Self { addr, rule, held, server })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Holds the answer to the next `method` (any method when `None`) request for exactly
    /// `path` (no query string).
    pub fn hold(&self, method: Option<Method>, path: &str) {
        *self.rule.lock().expect("rule lock") = Some(Rule { method, path: path.to_owned(), used: false });
    }

    /// Resolves once an answer is being held: the upstream has answered the request.
    pub async fn held(&self) {
        self.held.notified().await;
    }
}

impl Drop for HoldProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}
