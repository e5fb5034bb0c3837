module github.com/formsapi/formsapi

go 1.25

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/matryer/is v1.4.1 // indirect
)
