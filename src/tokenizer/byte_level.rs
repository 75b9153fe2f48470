//! GPT-2's reversible byte <-> unicode map (byte-level BPE).
//!
//! Byte-level vocabularies never contain raw bytes: every byte is shown as a printable
//! code point so that merges can be stored as text. Printable Latin-1 bytes map to
//! themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are moved to
//! U+0100.. in byte order. This is the table of llama.cpp's `unicode_byte_to_utf8_map`.

/// Whether the byte is shown as itself.
const fn is_direct(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

const fn build_byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut shifted: u32 = 0;
    let mut b: usize = 0;
    while b < 256 {
        let cp = if is_direct(b as u8) {
            b as u32
        } else {
            shifted += 1;
            255 + shifted
        };
        // Every value is < 0x200, always a valid scalar; the fallback is unreachable.
        table[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
}

const BYTE_TO_CHAR: [char; 256] = build_byte_to_char();

/// The printable code point that stands for `byte`.
pub(crate) fn byte_to_char(byte: u8) -> char {
    BYTE_TO_CHAR[byte as usize]
}

/// The byte that a printable code point stands for, if it is one of the 256.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 256 && is_direct(cp as u8) {
        return Some(cp as u8);
    }
    if (256..256 + 68).contains(&cp) {
        let nth = cp - 256;
        // The nth byte (in order) that is not shown as itself.
        return (0u8..=255).filter(|b| !is_direct(*b)).nth(nth as usize);
    }
    None
}

/// Appends the byte-level form of `text` (each UTF-8 byte as its code point) to `out`.
pub(crate) fn encode_into(text: &str, out: &mut String) {
    out.extend(text.bytes().map(byte_to_char));
}

/// Decodes a byte-level token text back to raw bytes, as llama.cpp's `llama_decode_text`:
/// a code point outside the table is kept as `[UNK_BYTE_0x..<text>]` so nothing is lost silently.
pub(crate) fn decode_token_text(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
}

/// The length of [`decode_token_text`]'s output for `text`, without making it: each code
/// point outside the table costs the whole text again, so a long hostile token would decode
/// to its length squared.
pub(crate) fn decoded_len(text: &str) -> u64 {
    text.chars()
        .map(|c| match char_to_byte(c) {
            Some(_) => 1,
            None => ("[UNK_BYTE_0x]".len() + 2 * c.len_utf8() + text.len()) as u64,
        })
        .sum()
}

/// The 256 single-character tokens of GPT-2's byte-level alphabet, byte 0 first: a vocabulary
/// that can spell any text (used by synthetic test models).
pub fn byte_level_alphabet() -> Vec<String> {
    (0..=255u8).map(|b| byte_to_char(b).to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        for b in 0u8..=255 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(byte_to_char(b' '), '\u{120}'); // 'Ġ'
        assert_eq!(byte_to_char(b'\n'), '\u{10A}'); // 'Ċ'
        assert_eq!(char_to_byte('\u{400}'), None);
    }
}
