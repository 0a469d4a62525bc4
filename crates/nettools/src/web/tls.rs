//! The TLS settings of this crate's https clients (`http_fetch`, `web_search`): rustls with
//! the ring provider, trusting the Mozilla roots `webpki-roots` bundles, or only the root
//! certificates the caller gives (a test's own authority, a box's). reqwest is handed the
//! finished configuration, so the system's certificate store is never read (a box may not
//! have one) and no process-wide crypto provider is needed or installed.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

/// The client configuration trusting `roots` (each a PEM bundle or one DER certificate), or
/// the bundled Mozilla roots when `roots` is empty. The error names the root at fault.
pub(super) fn client_config(roots: &[Vec<u8>]) -> Result<ClientConfig, String> {
    let store = if roots.is_empty() {
        RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }
    } else {
        let mut store = RootCertStore::empty();
        for (index, bytes) in roots.iter().enumerate() {
            for certificate in certificates(bytes).map_err(|e| root_error(index, &e))? {
                store.add(certificate).map_err(|e| root_error(index, &e))?;
            }
        }
        store
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(config)
}

fn root_error(index: usize, reason: &dyn std::fmt::Display) -> String {
    format!("root certificate {index}: {reason}")
}

/// The certificates of `bytes`: every one of a PEM text, or `bytes` as one DER certificate.
fn certificates(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    if !bytes.trim_ascii_start().starts_with(b"-----BEGIN") {
        return Ok(vec![CertificateDer::from(bytes.to_vec())]);
    }
    let certificates = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certificates.is_empty() {
        return Err("no certificate in the PEM text".to_string());
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_roots_given_means_the_bundled_mozilla_roots() {
        assert!(client_config(&[]).is_ok());
        assert!(!webpki_roots::TLS_SERVER_ROOTS.is_empty());
    }

    #[test]
    fn a_pem_text_without_a_certificate_is_refused_naming_the_root() {
        let error = client_config(&[
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(),
        ])
        .unwrap_err();
        assert_eq!(error, "root certificate 0: no certificate in the PEM text");
    }

    #[test]
    fn bytes_that_are_no_certificate_are_refused_naming_the_root() {
        let error = client_config(&[b"not a certificate".to_vec()]).unwrap_err();
        assert!(error.starts_with("root certificate 0: "), "{error}");
    }
}
