// TestPki: a throw-away certificate authority for the TLS unit tests, made with OpenSSL's API in
// a temporary directory (deleted on destruction): a CA, leaf certificates it signs with chosen
// subject alternative names and validity, and certificates of an unrelated CA.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace kproxy::testing {

class TestPki {
 public:
  struct Identity {
    std::string cert;  ///< PEM certificate file
    std::string key;   ///< PEM private key file
  };

  TestPki() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kproxy-tls-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    ca_key_ = new_key();
    ca_cert_ = make_cert("kproxy test CA", "", 0, 3600, ca_key_, nullptr, ca_key_, true);
    ca_file_ = write_cert("ca.pem", ca_cert_);
    other_key_ = new_key();
    other_cert_ = make_cert("unrelated CA", "", 0, 3600, other_key_, nullptr, other_key_, true);
    other_ca_file_ = write_cert("other-ca.pem", other_cert_);
  }
  ~TestPki() {
    for (X509* c : {ca_cert_, other_cert_}) X509_free(c);
    for (EVP_PKEY* k : {ca_key_, other_key_}) EVP_PKEY_free(k);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& ca_file() const { return ca_file_; }
  const std::string& other_ca_file() const { return other_ca_file_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// A leaf certificate signed by the test CA (or the unrelated one), valid from now +
  /// `not_before_s` to now + `not_after_s`, with `sans` like "DNS:localhost,IP:127.0.0.1".
  Identity issue(const std::string& name, const std::string& sans, long not_before_s = -60, long not_after_s = 3600,
                 bool by_unrelated_ca = false) {
    EVP_PKEY* key = new_key();
    X509* cert = by_unrelated_ca ? make_cert(name, sans, not_before_s, not_after_s, key, other_cert_, other_key_, false)
                                 : make_cert(name, sans, not_before_s, not_after_s, key, ca_cert_, ca_key_, false);
    Identity id{write_cert(name + ".pem", cert), write_key(name + ".key", key)};
    X509_free(cert);
    EVP_PKEY_free(key);
    return id;
  }

  /// Writes `text` to a file in the directory and returns its path.
  std::string write_text(const std::string& name, const std::string& text) const {
    std::string p = path(name);
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return p;
  }

 private:
  static EVP_PKEY* new_key() {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    REQUIRE(key != nullptr);
    return key;
  }

  X509* make_cert(const std::string& cn, const std::string& sans, long not_before_s, long not_after_s, EVP_PKEY* key, X509* issuer,
                  EVP_PKEY* issuer_key, bool is_ca) {
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial_);
    X509_gmtime_adj(X509_getm_notBefore(x), not_before_s);
    X509_gmtime_adj(X509_getm_notAfter(x), not_after_s);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : X509_get_subject_name(x));
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, nullptr, nullptr, 0);
    auto add = [&](int nid, const char* value) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
      REQUIRE(ext != nullptr);
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    };
    if (is_ca) {
      add(NID_basic_constraints, "critical,CA:TRUE");
      add(NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      add(NID_basic_constraints, "CA:FALSE");
      if (!sans.empty()) add(NID_subject_alt_name, sans.c_str());
    }
    REQUIRE(X509_sign(x, issuer_key, EVP_sha256()) > 0);
    return x;
  }

  std::string write_cert(const std::string& name, X509* cert) const {
    std::string p = path(name);
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    PEM_write_X509(f, cert);
    std::fclose(f);
    return p;
  }

  std::string write_key(const std::string& name, EVP_PKEY* key) const {
    std::string p = path(name);
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    return p;
  }

  std::filesystem::path dir_;
  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_cert_ = nullptr;
  EVP_PKEY* other_key_ = nullptr;
  X509* other_cert_ = nullptr;
  std::string ca_file_;
  std::string other_ca_file_;
  long serial_ = 0;
};

}  // namespace kproxy::testing
