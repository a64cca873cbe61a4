# A test CA and a certificate it signed, made with openssl at test time
# (sourced by the tests that speak TLS).
#   make_test_ca DIR                  DIR/ca.pem, DIR/ca.key (0600)
#   make_test_cert DIR NAME EXT       DIR/NAME.pem, DIR/NAME.key signed by DIR's CA;
#                                     EXT: the x509v3 extensions, one per line
#   make_test_server DIR              make_test_ca, then DIR/server.pem and
#                                     DIR/server.key for 127.0.0.1 and localhost
# The caller defines fail() (reports and exits).

make_test_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=matchbook test CA" -keyout "$1/ca.key" -out "$1/ca.pem" 2>/dev/null ||
    fail "openssl: cannot make the test CA"
  chmod 600 "$1/ca.key"
}

make_test_cert() {
  local dir=$1 name=$2
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null || fail "openssl: $name's key"
  printf '%s\n' "$3" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 2 -extfile "$dir/$name.ext" -out "$dir/$name.pem" 2>/dev/null ||
    fail "openssl: $name's certificate"
  chmod 600 "$dir/$name.key"
}

make_test_server() {
  make_test_ca "$1"
  make_test_cert "$1" server "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
}
