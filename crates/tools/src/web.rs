//! `http_fetch` (being written).
