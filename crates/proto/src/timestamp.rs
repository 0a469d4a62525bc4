//! Wall-clock instants as they travel on the wire.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::macros::format_description;

/// The one way boxmaker writes an instant: UTC, milliseconds, a `Z`.
const RFC3339_MILLIS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// An instant in milliseconds since the Unix epoch (UTC).
///
/// It is `Copy`, orders by time, and is written on the wire as RFC 3339 UTC with milliseconds
/// (`2026-11-30T00:47:30.123Z`). Parsing accepts any RFC 3339 offset and keeps milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// Why a text is not an RFC 3339 instant boxmaker can hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// The text does not follow RFC 3339.
    #[error("not an RFC 3339 date and time: {text:?} ({cause})")]
    Syntax {
        /// The text that was given.
        text: String,
        /// What the parser found wrong.
        cause: String,
    },
    /// The instant is outside the years 0000 to 9999.
    #[error("date and time out of range (years 0000 to 9999): {0}")]
    OutOfRange(i64),
}

/// The earliest instant an RFC 3339 text can name: 0000-01-01T00:00:00Z.
const MIN_MILLIS: i64 = -62_167_219_200_000;
/// The last millisecond an RFC 3339 text can name: 9999-12-31T23:59:59.999Z.
const MAX_MILLIS: i64 = 253_402_300_799_999;

impl Timestamp {
    /// The current time of this machine's clock.
    pub fn now() -> Timestamp {
        let millis = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(MAX_MILLIS),
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(-MIN_MILLIS),
        };
        Timestamp(millis.clamp(MIN_MILLIS, MAX_MILLIS))
    }

    /// The instant `millis` milliseconds after the epoch, if RFC 3339 can write it.
    pub fn from_millis(millis: i64) -> Result<Timestamp, TimestampError> {
        if (MIN_MILLIS..=MAX_MILLIS).contains(&millis) {
            Ok(Timestamp(millis))
        } else {
            Err(TimestampError::OutOfRange(millis))
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// This instant `millis` later, saturating at the last writable instant.
    pub fn plus_millis(self, millis: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(millis).clamp(MIN_MILLIS, MAX_MILLIS))
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-30T00:47:30.123Z`.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        // The range check in every constructor keeps both steps infallible; the fallback text
        // is still a valid instant rather than a panic.
        OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|at| at.format(RFC3339_MILLIS).ok())
            .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_string())
    }

    /// Reads an RFC 3339 date and time with any offset; sub-millisecond digits are dropped.
    pub fn parse(text: &str) -> Result<Timestamp, TimestampError> {
        let at = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map_err(|error| TimestampError::Syntax {
                text: text.to_string(),
                cause: error.to_string(),
            })?;
        let millis = at.unix_timestamp_nanos().div_euclid(1_000_000);
        let millis = i64::try_from(millis).map_err(|_| TimestampError::OutOfRange(i64::MAX))?;
        Timestamp::from_millis(millis)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_is_written_with_milliseconds_and_a_z() {
        assert_eq!(
            Timestamp::from_millis(0).map(Timestamp::to_rfc3339),
            Ok("1970-01-01T00:00:00.000Z".to_string())
        );
    }

    #[test]
    fn an_offset_is_converted_to_utc_and_extra_digits_are_dropped() {
        let at = Timestamp::parse("2026-11-30T01:47:30.123999+01:00");
        assert_eq!(
            at.map(Timestamp::to_rfc3339),
            Ok("2026-11-30T00:47:30.123Z".to_string())
        );
    }

    #[test]
    fn instants_before_the_epoch_round_down_to_the_millisecond() {
        let at = Timestamp::parse("1969-12-31T23:59:59.9995Z");
        assert_eq!(at.map(Timestamp::as_millis), Ok(-1));
    }

    #[test]
    fn the_limits_of_rfc3339_are_the_limits_of_a_timestamp() {
        assert!(Timestamp::from_millis(MAX_MILLIS).is_ok());
        assert_eq!(
            Timestamp::from_millis(MAX_MILLIS + 1),
            Err(TimestampError::OutOfRange(MAX_MILLIS + 1))
        );
        assert_eq!(
            Timestamp::from_millis(MIN_MILLIS).map(Timestamp::to_rfc3339),
            Ok("0000-01-01T00:00:00.000Z".to_string())
        );
        assert_eq!(Timestamp(MAX_MILLIS).plus_millis(5).as_millis(), MAX_MILLIS);
    }

    #[test]
    fn a_text_that_is_not_rfc3339_names_itself_in_the_error() {
        let error = Timestamp::parse("tomorrow").map(|_| ()).unwrap_err();
        assert!(error.to_string().contains("\"tomorrow\""), "{error}");
    }

    #[test]
    fn now_is_after_this_code_was_written() {
        let written = Timestamp::parse("2026-01-01T00:00:00Z");
        assert!(written.is_ok_and(|written| Timestamp::now() > written));
    }
}
