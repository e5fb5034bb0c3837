package wire

import "bytes"

// SkipSpace returns the index of the first byte of data at or after i
// that is not JSON white space.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd returns the index just past the JSON value that starts at
// data[i], in data that is valid JSON (checked
// before: it does not stop at the end of data that is not).
func ValueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		// From quote to quote: a quote ends the string unless an odd run
		// of backslashes comes right before it.
		for j := i + 1; ; {
			k := bytes.IndexByte(data[j:], '"')
			if k < 0 {
				return len(data) // not valid JSON: no end
			}
			q := j + k
			run := 0
			for p := q - 1; p > i && data[p] == '\\'; p-- {
				run++
			}
			if run%2 == 0 {
				return q + 1
			}
			j = q + 1
		}
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch data[j] {
			case '"':
				j = ValueEnd(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(data) && !(data[j] == ',' || data[j] == '}' || data[j] == ']' || data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
		j++
	}
	return j
}
