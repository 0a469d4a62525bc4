use super::*;

const MARKDOWN: &str = "# Guide\n\nIntro with [a link](/docs/a \"A\") and ![logo](/l.png).\n\n## Install\n\nRun [![badge](b.svg)](https://ci.example/b) now.\n\n```\n# not a heading [x](y)\n```\n\n### Details\n\nMore.\n\n## Use\n\nSee [](#top) and \\[not a link\\].\n";

#[test]
fn headings_links_and_title() {
    let page = Page::new("https://site.test/guide/", MARKDOWN);
    assert_eq!(page.title, "Guide");
    let outline: Vec<(usize, &str)> = page
        .headings
        .iter()
        .map(|h| (h.level, h.text.as_str()))
        .collect();
    assert_eq!(
        outline,
        [(1, "Guide"), (2, "Install"), (3, "Details"), (2, "Use")]
    );
    let urls: Vec<&str> = page.links.iter().map(|l| l.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://site.test/docs/a",
            "https://ci.example/b",
            "https://site.test/guide/#top"
        ]
    );
    assert_eq!(page.lines[2], "Intro with a link [1] and (image: logo).");
    assert_eq!(page.lines[6], "Run (image: badge) [2] now.");
    assert!(page.lines.contains(&"# not a heading [x](y)".to_string()));
    assert!(
        page.lines
            .iter()
            .any(|l| l == "See [3] and \\[not a link\\].")
    );
}

#[test]
fn sections_end_at_the_next_heading_of_their_level() {
    let page = Page::new("https://site.test/", MARKDOWN);
    let install = page.section("install").unwrap();
    assert_eq!(install.start_line, 5);
    assert_eq!(install.end_line, 16);
    assert!(install.text.contains("### Details"));
    let by_number = page.section("4").unwrap();
    assert_eq!(by_number.heading.as_deref(), Some("Use"));
    assert_eq!(by_number.end_line, page.lines.len());
    assert!(matches!(page.section("Nope"), Err(ReadError::NoHeading(_))));
}

#[test]
fn lines_are_bounded_and_say_where_the_rest_starts() {
    let long: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
    let page = Page::new("https://site.test/", &long);
    let read = page.read_lines(10, Some(900)).unwrap();
    assert_eq!(read.start_line, 10);
    assert_eq!(
        read.end_line,
        10 + proto::tools::web_pages::MAX_READ_LINES - 1
    );
    assert_eq!(read.next_line, Some(read.end_line + 1));
    assert!(read.text.starts_with("line 10\n"));
    let tail = page.read_lines(990, None).unwrap();
    assert_eq!((tail.end_line, tail.next_line), (1000, None));
    assert!(matches!(
        page.read_lines(1001, None),
        Err(ReadError::PastEnd { .. })
    ));
}

#[test]
fn grep_finds_lines_across_pages_and_refuses_bad_patterns() {
    let one = Page::new("https://a.test/", "alpha\nBeta\n");
    let two = Page::new("https://b.test/", "beta gamma\n");
    let found = grep(&[(1, &one), (2, &two)], "beta", true, 10).unwrap();
    let at: Vec<(u32, usize)> = found.matches.iter().map(|m| (m.page, m.line)).collect();
    assert_eq!(at, [(1, 2), (2, 1)]);
    let capped = grep(&[(1, &one), (2, &two)], "a", false, 1).unwrap();
    assert_eq!((capped.matches.len(), capped.total), (1, 3));
    assert!(grep(&[], "(", false, 1).is_err());
}
