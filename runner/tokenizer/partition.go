package tokenizer

import (
	"slices"
	"strings"
	"time"
)

// llamaPartition cuts a GGUF vocabulary's special tokens out of a text as
// llama.cpp's tokenizer_st_partition does (docs/tokenizer.md, "GGUF
// files"): one token at a time in its order (std::sort by length, longest
// first), each cut wherever it is found, left to right, in the stretches of
// text the tokens before it left. That is not HF's leftmost-longest: where
// two tokens overlap in a text, the one first in that order wins wherever
// it is.
type llamaPartition struct {
	ix   addedIndex      // the tokens' texts, each by its first in order
	rank map[int32]int32 // a token's place in the order
	// strip are the tokens that take the whitespace before (attrLStrip)
	// or after (attrRStrip) them out of the text with them.
	strip map[int32]tokenAttr
}

// newLlamaPartition orders ids as llama.cpp's special-token cache: by the
// length of their text in bytes, longest first. std::sort leaves ties in an
// order its C++ library chooses; id order is what small caches get from
// every one (docs/tokenizer.md, "GGUF files").
func newLlamaPartition(ids []int32, pieces map[int32]string, attrs []tokenAttr) *llamaPartition {
	order := slices.Clone(ids)
	slices.SortStableFunc(order, func(a, b int32) int { return len(pieces[b]) - len(pieces[a]) })
	p := &llamaPartition{rank: make(map[int32]int32, len(order))}
	for _, id := range ids {
		if a := attrs[id] & (attrLStrip | attrRStrip); a != 0 {
			if p.strip == nil {
				p.strip = map[int32]tokenAttr{}
			}
			p.strip[id] = a
		}
	}
	toks := make([]addedToken, len(order))
	for r, id := range order {
		p.rank[id] = int32(r)
		toks[r] = addedToken{content: pieces[id], id: id}
	}
	p.ix = newAddedIndex(toks)
	return p
}

// split is text cut into its special tokens and the text between them.
func (p *llamaPartition) split(text string, deadline time.Time) ([]segment, error) {
	// Every place each token occurs: a token is cut at one of them when no
	// token before it in the order, nor an earlier place of its own, has
	// taken any of its bytes, which is where llama.cpp's search of the
	// stretches left finds it.
	type occurrence struct {
		rank   int32
		pos, n int
		id     int32
		lo, hi int // the bytes it takes out of the text: its own and the whitespace it strips
	}
	var occs []occurrence
	for i := 0; i < len(text); i++ {
		if i&4095 == 4095 && time.Now().After(deadline) {
			return nil, errBudget
		}
		b := p.ix[text[i]]
		if b == nil {
			continue
		}
		for _, n := range b.lens {
			if n <= len(text)-i {
				if a, ok := b.toks[text[i:i+n]]; ok {
					occs = append(occs, occurrence{p.rank[a.id], i, n, a.id, i, i + n})
				}
			}
		}
	}
	if len(occs) == 0 {
		if text == "" {
			return nil, nil
		}
		return []segment{{text, -1}}, nil
	}
	slices.SortFunc(occs, func(a, b occurrence) int {
		if a.rank != b.rank {
			return int(a.rank - b.rank)
		}
		return a.pos - b.pos
	})
	taken := make(fenwick, len(text)+1)
	var cut []occurrence
	for k, o := range occs {
		if k&4095 == 4095 && time.Now().After(deadline) {
			return nil, errBudget
		}
		if taken.sum(o.pos+o.n)-taken.sum(o.pos) != 0 {
			continue
		}
		// Whitespace (C's isspace) up to the text another token took.
		free := func(j int) bool {
			return taken.sum(j+1) == taken.sum(j) && strings.IndexByte(" \t\n\v\f\r", text[j]) >= 0
		}
		if p.strip[o.id]&attrLStrip != 0 {
			for o.lo > 0 && free(o.lo-1) {
				o.lo--
			}
		}
		if p.strip[o.id]&attrRStrip != 0 {
			for o.hi < len(text) && free(o.hi) {
				o.hi++
			}
		}
		for j := o.lo; j < o.hi; j++ {
			taken.add(j)
		}
		cut = append(cut, o)
	}
	slices.SortFunc(cut, func(a, b occurrence) int { return a.pos - b.pos })
	var out []segment
	at := 0
	for _, o := range cut {
		if o.lo > at {
			out = append(out, segment{text[at:o.lo], -1})
		}
		out = append(out, segment{added: o.id})
		at = o.hi
	}
	if at < len(text) {
		out = append(out, segment{text[at:], -1})
	}
	return out, nil
}

// fenwick counts the bytes taken so far, to ask of a range in O(log n)
// whether any of it is.
type fenwick []int

// add marks byte i taken.
func (f fenwick) add(i int) {
	for i++; i < len(f); i += i & -i {
		f[i]++
	}
}

// sum is the number of bytes taken before byte i.
func (f fenwick) sum(i int) int {
	s := 0
	for ; i > 0; i -= i & -i {
		s += f[i]
	}
	return s
}
