package tokenizer

import "math/bits"

// introsort orders s as GCC's libstdc++ std::sort does, step for step:
// llama.cpp sorts its special tokens with std::sort, which is not stable,
// so tokens of one length come out in the order that algorithm leaves
// them in (docs/tokenizer.md, "GGUF files"), not in id order. less is
// the comparison std::sort is given.
func introsort[T any](s []T, less func(a, b T) bool) {
	if len(s) < 2 {
		return
	}
	introsortLoop(s, 0, len(s), 2*(bits.Len(uint(len(s)))-1), less)
	finalInsertionSort(s, 0, len(s), less)
}

// sortThreshold is the size below which the quicksort phase leaves a range
// for the final insertion sort.
const sortThreshold = 16

func introsortLoop[T any](s []T, first, last, depth int, less func(a, b T) bool) {
	for last-first > sortThreshold {
		if depth == 0 {
			heapSort(s, first, last, less)
			return
		}
		depth--
		cut := partitionPivot(s, first, last, less)
		introsortLoop(s, cut, last, depth, less)
		last = cut
	}
}

// partitionPivot moves the median of s[first+1], the middle and the last to
// s[first] and partitions the rest around it.
func partitionPivot[T any](s []T, first, last int, less func(a, b T) bool) int {
	mid := first + (last-first)/2
	a, b, c := first+1, mid, last-1
	var m int
	switch {
	case less(s[a], s[b]):
		switch {
		case less(s[b], s[c]):
			m = b
		case less(s[a], s[c]):
			m = c
		default:
			m = a
		}
	case less(s[a], s[c]):
		m = a
	case less(s[b], s[c]):
		m = c
	default:
		m = b
	}
	s[first], s[m] = s[m], s[first]
	lo, hi := first+1, last
	for {
		for less(s[lo], s[first]) {
			lo++
		}
		hi--
		for less(s[first], s[hi]) {
			hi--
		}
		if lo >= hi {
			return lo
		}
		s[lo], s[hi] = s[hi], s[lo]
		lo++
	}
}

func finalInsertionSort[T any](s []T, first, last int, less func(a, b T) bool) {
	if last-first <= sortThreshold {
		insertionSort(s, first, last, less)
		return
	}
	insertionSort(s, first, first+sortThreshold, less)
	for i := first + sortThreshold; i < last; i++ {
		linearInsert(s, i, less)
	}
}

func insertionSort[T any](s []T, first, last int, less func(a, b T) bool) {
	for i := first + 1; i < last; i++ {
		if less(s[i], s[first]) {
			v := s[i]
			copy(s[first+1:i+1], s[first:i])
			s[first] = v
			continue
		}
		linearInsert(s, i, less)
	}
}

// linearInsert moves s[i] down past the elements greater than it; one
// before it is known not to be.
func linearInsert[T any](s []T, i int, less func(a, b T) bool) {
	v := s[i]
	for less(v, s[i-1]) {
		s[i] = s[i-1]
		i--
	}
	s[i] = v
}

// heapSort is the fallback past the depth limit: make_heap, then
// sort_heap, as libstdc++'s partial_sort of the whole range does them.
func heapSort[T any](s []T, first, last int, less func(a, b T) bool) {
	h := s[first:last]
	n := len(h)
	for parent := (n - 2) / 2; parent >= 0; parent-- {
		adjustHeap(h, parent, n, h[parent], less)
	}
	for end := n - 1; end > 0; end-- {
		v := h[end]
		h[end] = h[0]
		adjustHeap(h, 0, end, v, less)
	}
}

// adjustHeap moves the hole at hole down to a leaf, always to the larger
// child, then pushes v up from there.
func adjustHeap[T any](h []T, hole, n int, v T, less func(a, b T) bool) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(h[child], h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(h[parent], v) {
		h[hole] = h[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	h[hole] = v
}
