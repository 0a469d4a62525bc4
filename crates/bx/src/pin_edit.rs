//! A grant file with pins written into it in place (`toml_edit`): only the `pins` of the named
//! `[[grant]]` tables change; every comment, blank line and key order of the file stays.

use toml_edit::{DocumentMut, InlineTable, Item, Table, TableLike, Value, value};

/// One pin to write: into the grant `grant` (its id), `tool` (`server.tool`) pinned to `hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The grant's id.
    pub grant: String,
    /// The tool, `server.tool`.
    pub tool: String,
    /// Its definition's hash.
    pub hash: String,
}

/// `text` (a grant file) with `pins` written: each grant's `pins` table gains (or replaces) the
/// tool's pin, and a grant without one gets `pins = { … }` after its last key. `Err` says why
/// the file cannot be edited so.
pub fn with_pins(text: &str, pins: &[Pin]) -> Result<String, String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("it is not TOML that can be edited in place: {e}"))?;
    for pin in pins {
        let table = grant_table(&mut doc, &pin.grant)
            .ok_or_else(|| format!("it holds no [[grant]] table with id {:?}", pin.grant))?;
        set_pin(table, pin)?;
    }
    Ok(doc.to_string())
}

/// A `[[grant]]` table, or an inline table of a `grant = [...]` list.
enum GrantTable<'d> {
    Table(&'d mut Table),
    Inline(&'d mut InlineTable),
}

/// The grant table whose id is `id`.
fn grant_table<'d>(doc: &'d mut DocumentMut, id: &str) -> Option<GrantTable<'d>> {
    let is = |t: &dyn TableLike| t.get("id").and_then(Item::as_str) == Some(id);
    match doc.get_mut("grant")? {
        Item::ArrayOfTables(tables) => tables.iter_mut().find(|t| is(&**t)).map(GrantTable::Table),
        Item::Value(Value::Array(items)) => items
            .iter_mut()
            .filter_map(Value::as_inline_table_mut)
            .find(|t| is(&**t))
            .map(GrantTable::Inline),
        _ => None,
    }
}

/// Writes `pin` into the grant `table`.
fn set_pin(table: GrantTable<'_>, pin: &Pin) -> Result<(), String> {
    let hash = Value::from(pin.hash.as_str());
    let fresh = || {
        let mut pins = InlineTable::new();
        pins.insert(pin.tool.as_str(), hash.clone());
        pins
    };
    match table {
        GrantTable::Table(table) => match table.get_mut("pins") {
            Some(Item::Value(Value::InlineTable(pins))) => {
                insert_inline(pins, &pin.tool, hash.clone());
            }
            Some(Item::Table(pins)) => {
                pins.insert(&pin.tool, value(hash.clone()));
            }
            Some(Item::None) | None => {
                table.insert("pins", value(fresh()));
            }
            Some(_) => return Err(not_a_table(pin)),
        },
        GrantTable::Inline(table) => match table.get_mut("pins") {
            Some(Value::InlineTable(pins)) => insert_inline(pins, &pin.tool, hash.clone()),
            Some(_) => return Err(not_a_table(pin)),
            None => insert_inline(table, "pins", Value::InlineTable(fresh())),
        },
    }
    Ok(())
}

fn not_a_table(pin: &Pin) -> String {
    format!(
        "the pins of grant {:?} are not a table; write them as pins = {{ \"server.tool\" = \"…\" }}",
        pin.grant
    )
}

/// Sets `key` of an inline table: a new key goes last, and the space the last value had
/// before `}` moves after it (`{ a = 1, b = 2 }`, not `{ a = 1 , b = 2 }`).
fn insert_inline(table: &mut InlineTable, key: &str, item: Value) {
    if table.contains_key(key) {
        table.insert(key, item);
        return;
    }
    let suffix = table.iter_mut().last().and_then(|(_, last)| {
        let suffix = last.decor().suffix().cloned();
        last.decor_mut().set_suffix("");
        suffix
    });
    table.insert(key, item);
    if let (Some(suffix), Some(new)) = (suffix, table.get_mut(key)) {
        new.decor_mut().set_suffix(suffix);
    }
}

#[cfg(test)]
mod tests {
    use super::{Pin, with_pins};

    fn pin(grant: &str, tool: &str, hash: &str) -> Pin {
        Pin {
            grant: grant.into(),
            tool: tool.into(),
            hash: hash.into(),
        }
    }

    #[test]
    fn pins_are_written_into_their_grant_and_the_rest_of_the_file_stays_as_written() {
        let text = "# my grants\n\n[[grant]]   # the box\nid = \"box\"\nserver = \"git\"\n\n# reads\n[[grant]]\nid = \"read\"\ntool = \"git.*\"   # every tool\non_untrusted = \"allow\"\n\n[[grant]]\nid = \"more\"\ntool = [\"git.log\", \"git.show\"]\npins = { \"git.log\" = \"old\" } # pinned before\n";
        let edited = with_pins(
            text,
            &[
                pin("read", "git.git_status", "aa"),
                pin("read", "git.git_diff", "bb"),
                pin("more", "git.log", "cc"),
                pin("more", "git.show", "dd"),
            ],
        )
        .unwrap();
        assert_eq!(
            edited,
            "# my grants\n\n[[grant]]   # the box\nid = \"box\"\nserver = \"git\"\n\n# reads\n[[grant]]\nid = \"read\"\ntool = \"git.*\"   # every tool\non_untrusted = \"allow\"\npins = { \"git.git_status\" = \"aa\", \"git.git_diff\" = \"bb\" }\n\n[[grant]]\nid = \"more\"\ntool = [\"git.log\", \"git.show\"]\npins = { \"git.log\" = \"cc\", \"git.show\" = \"dd\" } # pinned before\n"
        );
    }

    #[test]
    fn a_pins_table_of_its_own_and_a_list_of_inline_grants_are_edited_too() {
        let text = "[[grant]]\nid = \"a\"\ntool = \"git.x\"\n\n[grant.pins]\n\"git.x\" = \"old\"\n";
        let edited = with_pins(text, &[pin("a", "git.x", "new")]).unwrap();
        assert_eq!(
            edited,
            "[[grant]]\nid = \"a\"\ntool = \"git.x\"\n\n[grant.pins]\n\"git.x\" = \"new\"\n"
        );
        let inline = "grant = [{ id = \"a\", tool = \"git.x\" }]\n";
        let edited = with_pins(inline, &[pin("a", "git.x", "h")]).unwrap();
        assert_eq!(
            edited,
            "grant = [{ id = \"a\", tool = \"git.x\", pins = { \"git.x\" = \"h\" } }]\n"
        );
    }

    #[test]
    fn a_grant_that_is_not_there_or_pins_that_are_not_a_table_are_refused() {
        let text = "[[grant]]\nid = \"a\"\ntool = \"git.x\"\npins = 3\n";
        let missing = with_pins(text, &[pin("b", "git.x", "h")]).unwrap_err();
        assert!(
            missing.contains("no [[grant]] table with id \"b\""),
            "{missing}"
        );
        let bad = with_pins(text, &[pin("a", "git.x", "h")]).unwrap_err();
        assert!(bad.contains("are not a table"), "{bad}");
        assert!(with_pins("[[grant]\n", &[]).is_err());
    }
}
