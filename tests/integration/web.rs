//! The labeling page (issue 12): its embedded files served without a key, with their
//! content types, CSP and ETags, at the page's URLs; and, in a real headless Chromium over
//! WebDriver, labeling a unit by keyboard.

use reqwest::StatusCode;

use crate::server::{Options, TestServer};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn content_type(reply: &crate::server::Reply) -> &str {
    reply.headers["content-type"].to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_page_and_assets_are_served_without_a_key_with_csp_and_etags() {
    let server = TestServer::start(Options {
        api_keys: vec!["alice:secret-key".into()],
        ..Options::default()
    })
    .await;
    let pages = [
        "/",
        "/sessions",
        "/label/0123456789abcdef/A:some-event",
        "/label/0123456789abcdef",
        "/review/0123456789abcdef",
        "/agreement",
    ];
    let shell = server.get("/").await;
    for path in pages {
        let page = server.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert_eq!(content_type(&page), "text/html; charset=utf-8", "{path}");
        assert_eq!(page.headers["content-security-policy"], CSP, "{path}");
        assert_eq!(page.bytes, shell.bytes, "{path}: every page URL is the shell");
    }
    let html = String::from_utf8(shell.bytes.clone()).unwrap();
    assert!(html.contains("/assets/main.js") && !html.contains("<script>"));

    for name in sessiongraph::web::asset_names() {
        let path = format!("/assets/{name}");
        let asset = server.get(&path).await;
        assert_eq!(asset.status, StatusCode::OK, "{path}");
        let expected = match name.rsplit('.').next().unwrap() {
            "html" => "text/html; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "js" => "text/javascript; charset=utf-8",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(content_type(&asset), expected, "{path}");
        assert_eq!(asset.headers["content-security-policy"], CSP, "{path}");
        assert_eq!(asset.headers["x-content-type-options"], "nosniff");
        let etag = asset.headers["etag"].to_str().unwrap().to_owned();
        let again = server.get_if_none_match(&path, &etag).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(again.headers["etag"].to_str().unwrap(), etag);
        assert!(again.bytes.is_empty());
        if name.ends_with(".js") {
            every_import_is_an_asset(name, &String::from_utf8(asset.bytes).unwrap());
        }
    }

    let missing = server.get("/assets/nope.js").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json["error"], "Not Found", "a JSON 404");

    let api = server.get("/api/codebook").await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED, "the API still wants a key");
    assert_eq!(
        server.get("/api/no-such-route").await.status,
        StatusCode::UNAUTHORIZED
    );
    let with_key = server
        .get_with("/api/codebook", &[("authorization", "Bearer secret-key")])
        .await;
    assert_eq!(with_key.status, StatusCode::OK);
    assert_eq!(
        with_key.headers["content-security-policy"], "default-src 'none'; frame-ancestors 'none'",
        "API bodies keep their own CSP"
    );
    server.stop().await;
}

/// Every `from './x.js'` of a module names an embedded asset, and no module builds markup
/// from strings.
fn every_import_is_an_asset(name: &str, source: &str) {
    let names: Vec<&str> = sessiongraph::web::asset_names().collect();
    for part in source.split("from './").skip(1) {
        let target = part.split('\'').next().unwrap();
        assert!(
            names.contains(&target),
            "{name} imports {target}, which is not embedded"
        );
    }
    for forbidden in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!source.contains(forbidden), "{name} uses {forbidden}");
    }
}
