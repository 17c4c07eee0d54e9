//! Where WebSocket frames begin and end in a stream of bytes (RFC 6455, 5.2), so that a tunnel
//! closed at the drain deadline can end each direction after a whole frame and then send a
//! close frame of its own, rather than cut a frame in half.

/// A close frame with status 1001 ("going away"), as a server sends it: unmasked.
pub(crate) const CLOSE_TO_CLIENT: [u8; 4] = [0x88, 0x02, 0x03, 0xE9];

/// A close frame with status 1001, as a client sends it: masked with `mask` (RFC 6455, 5.3).
pub(crate) fn close_to_server(mask: [u8; 4]) -> [u8; 8] {
    [
        0x88,
        0x82,
        mask[0],
        mask[1],
        mask[2],
        mask[3],
        0x03 ^ mask[0],
        0xE9 ^ mask[1],
    ]
}

/// The position in a stream of frames.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    /// The header bytes read of the frame that is starting (at most 14).
    header: [u8; 14],
    have: usize,
    /// Payload bytes left of the current frame, once its header is whole.
    payload_left: u64,
    in_payload: bool,
}

impl Frames {
    /// Whether the stream is between two frames.
    pub(crate) fn at_boundary(&self) -> bool {
        self.have == 0 && !self.in_payload
    }

    /// Reads `bytes` up to the end of the current frame, and answers how many it read: all of
    /// them if the frame goes on past them, at least one if there is one.
    pub(crate) fn through_frame_end(&mut self, bytes: &[u8]) -> usize {
        let mut at = 0;
        while at < bytes.len() {
            if self.in_payload {
                let skip = usize::try_from(self.payload_left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len() - at);
                self.payload_left -= skip as u64;
                at += skip;
                if self.payload_left == 0 {
                    self.in_payload = false;
                    return at;
                }
            } else {
                self.header[self.have] = bytes[at];
                self.have += 1;
                at += 1;
                if let Some(length) = self.header_done() {
                    self.have = 0;
                    if length == 0 {
                        return at;
                    }
                    self.in_payload = true;
                    self.payload_left = length;
                }
            }
        }
        at
    }

    /// Reads all of `bytes`.
    pub(crate) fn read(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let used = self.through_frame_end(bytes);
            bytes = &bytes[used..];
        }
    }

    /// The payload length once the header is whole.
    fn header_done(&self) -> Option<u64> {
        if self.have < 2 {
            return None;
        }
        let masked = self.header[1] & 0x80 != 0;
        let (length_bytes, short) = match self.header[1] & 0x7F {
            126 => (2, None),
            127 => (8, None),
            short => (0, Some(u64::from(short))),
        };
        let need = 2 + length_bytes + if masked { 4 } else { 0 };
        if self.have < need {
            return None;
        }
        Some(short.unwrap_or_else(|| {
            self.header[2..2 + length_bytes]
                .iter()
                .fold(0, |length, &byte| length << 8 | u64::from(byte))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame with a payload of `length` bytes, masked or not.
    fn frame(length: usize, masked: bool) -> Vec<u8> {
        let mut frame = vec![0x82];
        let mask_bit = if masked { 0x80 } else { 0 };
        match length {
            0..=125 => frame.push(mask_bit | length as u8),
            126..=65535 => {
                frame.push(mask_bit | 126);
                frame.extend_from_slice(&(length as u16).to_be_bytes());
            }
            _ => {
                frame.push(mask_bit | 127);
                frame.extend_from_slice(&(length as u64).to_be_bytes());
            }
        }
        if masked {
            frame.extend_from_slice(&[1, 2, 3, 4]);
        }
        frame.extend(std::iter::repeat_n(7, length));
        frame
    }

    #[test]
    fn boundaries_are_found_whatever_the_reads() {
        let frames: Vec<Vec<u8>> = [0, 5, 125, 126, 300, 70_000]
            .into_iter()
            .flat_map(|length| [frame(length, false), frame(length, true)])
            .collect();
        let stream: Vec<u8> = frames.concat();
        let boundaries: Vec<usize> = frames
            .iter()
            .scan(0, |end, frame| {
                *end += frame.len();
                Some(*end)
            })
            .collect();
        for chunk in [1, 2, 3, 7, 100, 4096, stream.len()] {
            let mut frames = Frames::default();
            let mut found = Vec::new();
            let mut at = 0;
            for piece in stream.chunks(chunk) {
                let mut piece = piece;
                while !piece.is_empty() {
                    let used = frames.through_frame_end(piece);
                    at += used;
                    piece = &piece[used..];
                    if frames.at_boundary() {
                        found.push(at);
                    }
                }
            }
            assert_eq!(found, boundaries, "reads of {chunk} bytes");
        }
    }

    #[test]
    fn close_frames() {
        let mut frames = Frames::default();
        assert_eq!(frames.through_frame_end(&CLOSE_TO_CLIENT), 4);
        assert!(frames.at_boundary());
        let masked = close_to_server([9, 8, 7, 6]);
        assert_eq!(frames.through_frame_end(&masked), 8);
        assert!(frames.at_boundary());
        // Unmasked, the payload is status 1001.
        assert_eq!([masked[6] ^ 9, masked[7] ^ 8], [0x03, 0xE9]);
    }
}
