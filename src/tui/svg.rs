//! Renders a ratatui buffer to SVG: how the README's picture of the dashboard is made
//! from the project's own drawing code.

use std::fmt::Write;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const CELL_W: f64 = 8.4;
const CELL_H: f64 = 17.0;
const BG: &str = "#1e1e2e";
const FG: &str = "#cdd6f4";

/// An SVG document of the buffer, one `<text>` run per stretch of same-styled cells.
pub fn render(buf: &Buffer) -> String {
    let (w, h) = (buf.area.width, buf.area.height);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">"#,
        f64::from(w) * CELL_W,
        f64::from(h) * CELL_H
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="{BG}"/>"#);
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let cell = &buf[(x, y)];
            let (fg, bg, bold) = style_of(cell);
            let start = x;
            let mut run = String::new();
            while x < w {
                let c = &buf[(x, y)];
                if style_of(c) != (fg.clone(), bg.clone(), bold) {
                    break;
                }
                run.push_str(c.symbol());
                x += 1;
            }
            let px = f64::from(start) * CELL_W;
            let py = f64::from(y) * CELL_H;
            if let Some(bg) = &bg {
                let _ = writeln!(
                    out,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{:.1}" height="{CELL_H}" fill="{bg}"/>"#,
                    f64::from(x - start) * CELL_W
                );
            }
            if !run.trim().is_empty() {
                let _ = writeln!(
                    out,
                    r#"<text x="{px:.1}" y="{:.1}" fill="{fg}"{} xml:space="preserve">{}</text>"#,
                    py + CELL_H - 4.0,
                    if bold { r#" font-weight="bold""# } else { "" },
                    escape(&run)
                );
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

fn style_of(cell: &ratatui::buffer::Cell) -> (String, Option<String>, bool) {
    let mut fg = hex(cell.fg).unwrap_or_else(|| FG.to_owned());
    let mut bg = hex(cell.bg);
    if cell.modifier.contains(Modifier::REVERSED) {
        let old_fg = fg.clone();
        fg = bg.unwrap_or_else(|| BG.to_owned());
        bg = Some(old_fg);
    }
    (fg, bg, cell.modifier.contains(Modifier::BOLD))
}

/// The colours of a common dark palette; `Reset` means the default.
fn hex(c: Color) -> Option<String> {
    let s = match c {
        Color::Reset => return None,
        Color::Black => "#45475a",
        Color::Red => "#e64553",
        Color::Green => "#40a02b",
        Color::Yellow => "#df8e1d",
        Color::Blue => "#1e66f5",
        Color::Magenta => "#ea76cb",
        Color::Cyan => "#04a5e5",
        Color::Gray => "#bac2de",
        Color::DarkGray => "#6c7086",
        Color::LightRed => "#f38ba8",
        Color::LightGreen => "#a6e3a1",
        Color::LightYellow => "#f9e2af",
        Color::LightBlue => "#89b4fa",
        Color::LightMagenta => "#f5c2e7",
        Color::LightCyan => "#89dceb",
        Color::White => "#ffffff",
        Color::Rgb(r, g, b) => return Some(format!("#{r:02x}{g:02x}{b:02x}")),
        Color::Indexed(i) => return Some(format!("#{i:02x}{i:02x}{i:02x}")),
    };
    Some(s.to_owned())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
