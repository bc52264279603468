package tokenizer

import (
	"bytes"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
)

func encodeImage(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageSizeFromHeader(t *testing.T) {
	webpX := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00"),
		byte(1023&0xff), byte(1023>>8), 0, byte(767&0xff), byte(767>>8), 0)
	tests := []struct {
		name       string
		data       []byte
		w, h       int
		recognized bool
	}{
		{"png", encodeImage(t, "png", 640, 480), 640, 480, true},
		{"jpeg", encodeImage(t, "jpeg", 300, 200), 300, 200, true},
		{"gif", encodeImage(t, "gif", 17, 33), 17, 33, true},
		{"webp VP8X", webpX, 1024, 768, true},
		{"garbage", []byte("not an image at all, really"), 0, 0, false},
		{"truncated png", encodeImage(t, "png", 10, 10)[:20], 0, 0, false},
	}
	for _, tt := range tests {
		w, h, ok := imageSize(tt.data)
		if ok != tt.recognized || w != tt.w || h != tt.h {
			t.Errorf("%s: imageSize = %d×%d %v, want %d×%d %v", tt.name, w, h, ok, tt.w, tt.h, tt.recognized)
		}
	}
}

func TestImageTokens(t *testing.T) {
	tests := []struct {
		w, h              int
		openai, anthropic int64
	}{
		// 1024×1024: short side to 768 → 768×768 → 2×2 tiles → 85+680; 1024²/750 = 1398.1.
		{1024, 1024, 765, 1399},
		// 512×512: one tile; 512²/750 = 349.5.
		{512, 512, 255, 350},
		// 4000×3000: fit 2048 → 2048×1536 → short side 768 → 1024×768 → 2×2 tiles; long edge
		// to 1568 → 1568×1176 → 2458.6, capped at 1600.
		{4000, 3000, 765, 1600},
	}
	for _, tt := range tests {
		if got := openAIImageTokens(tt.w, tt.h); got != tt.openai {
			t.Errorf("openAIImageTokens(%d, %d) = %d, want %d", tt.w, tt.h, got, tt.openai)
		}
		if got := anthropicImageTokens(tt.w, tt.h); got != tt.anthropic {
			t.Errorf("anthropicImageTokens(%d, %d) = %d, want %d", tt.w, tt.h, got, tt.anthropic)
		}
	}
	img := &compactorv1.ImagePart{Source: &compactorv1.ImagePart_Data{Data: encodeImage(t, "png", 512, 512)}}
	if got := imageTokens(img); got != 350 {
		t.Errorf("imageTokens(512×512 png) = %d, want the larger estimate 350", got)
	}
}
