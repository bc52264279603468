package tokenizer

import "testing"

// FuzzImageSize feeds arbitrary bytes to the image header reader: it must never panic and
// never report a non-positive size.
func FuzzImageSize(f *testing.F) {
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x01\x00\x00\x00\x01\x00"))
	f.Add([]byte("GIF89a\x10\x00\x10\x00"))
	f.Add([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xc0\x00\x11\x08\x00\x10\x00\x20\x03"))
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, h, ok := imageSize(data)
		if ok && (w <= 0 || h <= 0) {
			t.Errorf("imageSize = %d×%d, ok", w, h)
		}
		_ = pdfPages(data)
	})
}
