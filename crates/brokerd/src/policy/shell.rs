//! Shell coverage (being written).
